"""The embedded SmolLM2 model, for real: it streams a reply and stops on cancel."""

from __future__ import annotations

import asyncio
from contextlib import aclosing
from typing import Any

import pytest
from channels.db import database_sync_to_async

from conversations.engines import get_engine, reset_engines
from conversations.engines.base import ChatMessage, FinishReason, SamplingParams
from conversations.models import Message
from tests.support.sockets import finished, streamed_text

pytestmark = [pytest.mark.model, pytest.mark.django_db(transaction=True)]

BOUND = 60.0  # keeps a broken engine from hanging the suite; not a speed requirement


@pytest.fixture
def llamacpp(settings: Any) -> Any:
    settings.CHAT_ENGINE = "llamacpp"
    settings.CHAT_MAX_TOKENS = 48
    settings.CHAT_TEMPERATURE = 0.0
    reset_engines()
    return get_engine("llamacpp")


async def test_it_streams_a_short_reply(
    connect: Any, alice: Any, conversation: Any, llamacpp: Any
) -> None:
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="Say hello in three words.")
    events = await socket.receive_until(finished, timeout=60)

    text = streamed_text(events)
    assert text.strip(), "the model wrote something"
    row = await database_sync_to_async(conversation.messages.get)(role=Message.Role.ASSISTANT)
    assert row.status == Message.Status.COMPLETE
    assert row.content == text
    assert row.engine == "llamacpp" and row.model.startswith("SmolLM2")
    assert 0 < row.completion_tokens <= 48


async def test_it_stops_the_native_loop_on_cancel(
    connect: Any, alice: Any, conversation: Any, llamacpp: Any, settings: Any
) -> None:
    settings.CHAT_MAX_TOKENS = 400
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="Write a very long story about a dragon.")
    await socket.receive_until(lambda e: e["type"] == "message.delta", timeout=60)
    await socket.send(action="cancel")
    events = await socket.receive_until(finished, timeout=30)

    assert events[-1]["message"]["status"] == "cancelled"
    row = await database_sync_to_async(conversation.messages.get)(role=Message.Role.ASSISTANT)
    assert row.status == Message.Status.CANCELLED
    assert row.completion_tokens < 400
    assert row.cancel_latency_ms is not None
    # The model is free again: the next reply is answered, in full.
    settings.CHAT_MAX_TOKENS = 8
    await socket.send(action="send", content="Say hi.")
    events = await socket.receive_until(finished, timeout=60)
    assert events[-1]["message"]["status"] == "complete"
    assert events[-1]["message"]["content"].strip()


async def test_stopping_a_queued_reply_removes_it_without_running(llamacpp: Any) -> None:
    params = SamplingParams(max_tokens=200, temperature=0.0)
    chat = [ChatMessage("user", "Tell me a long story.")]
    running = llamacpp.stream(chat, params, request_id="a")
    queued = llamacpp.stream(chat, params, request_id="b")
    running_deltas, queued_deltas = aiter(running), aiter(queued)
    first = asyncio.ensure_future(anext(running_deltas))
    waiting = asyncio.ensure_future(anext(queued_deltas))
    async with asyncio.timeout(BOUND):
        assert await first
    await asyncio.sleep(0.05)
    assert not waiting.done(), "the second reply waits for the model"
    assert queued.waiting_in_queue and not running.waiting_in_queue, "no stall clock while queued"

    # Stopped while the other reply holds the model: confirmed without waiting for it.
    async with asyncio.timeout(BOUND):
        assert await queued.stop() is not None
        with pytest.raises(StopAsyncIteration):
            await waiting  # its stream ends without a token
    assert queued.result.completion_tokens == 0
    assert queued.result.finish_reason is FinishReason.ABORT
    assert not queued.waiting_in_queue

    async with asyncio.timeout(BOUND):
        assert await running.stop() is not None
    assert running.result.finish_reason is FinishReason.ABORT
    await running_deltas.aclose()

    # The model is free again: the next reply runs to its end.
    after = llamacpp.stream(chat, SamplingParams(max_tokens=8, temperature=0.0), request_id="c")
    async with asyncio.timeout(BOUND), aclosing(aiter(after)) as deltas:
        text = "".join([d async for d in deltas])
    assert text.strip()
    assert after.result.finish_reason in (FinishReason.STOP, FinishReason.LENGTH)
    assert after.result.completion_tokens > 0

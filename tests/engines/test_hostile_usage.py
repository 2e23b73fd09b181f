"""An OpenAI-compatible server that sends wrong token counts or content that is not text (issue
23, finding 8): the text the tab was shown is the text saved, and a wrong count is dropped."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import pytest
from channels.db import database_sync_to_async

from conversations.engines import reset_engines
from conversations.engines.base import ChatMessage, EngineError, SamplingParams
from conversations.engines.openai import OpenAIEngine
from conversations.models import Message
from tests.support.sockets import finished, streamed_text

BOUND = 20.0  # keeps a broken engine from hanging the suite; not a speed requirement


def text_chunk(content: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": None}]}


def usage_chunk(usage: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": usage}


class ScriptedServer:
    """Answers every request with the events of `chunks` (then [DONE]), over real HTTP/1.1."""

    def __init__(self) -> None:
        self.chunks: list[dict[str, Any]] = []
        self.port = 0
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._answer, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode().partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            await reader.readexactly(length)
            events = [json.dumps(chunk) for chunk in self.chunks] + ["[DONE]"]
            body = "".join(f"data: {event}\n\n" for event in events).encode()
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                + body
            )
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


@pytest.fixture
async def server() -> AsyncIterator[ScriptedServer]:
    scripted = ScriptedServer()
    await scripted.start()
    yield scripted
    await scripted.close()


TEXT = [text_chunk("Hello"), text_chunk(" world")]  # two chunks: two tokens counted

WRONG_USAGE = [
    {"prompt_tokens": -1, "completion_tokens": -5},
    {"prompt_tokens": "7", "completion_tokens": "lots"},
    {"prompt_tokens": 2**40, "completion_tokens": 2**40},
    {"prompt_tokens": True, "completion_tokens": 1.5},
    {"prompt_tokens": None, "completion_tokens": [2]},
]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("usage", WRONG_USAGE, ids=[json.dumps(u) for u in WRONG_USAGE])
async def test_finding_8_wrong_usage_is_dropped_and_the_reply_kept(
    connect: Any,
    alice: Any,
    conversation: Any,
    server: ScriptedServer,
    settings: Any,
    usage: dict[str, Any],
) -> None:
    """(Before: the final save refused the counts, and the reply ended interrupted, empty.)"""
    settings.CHAT_ENGINE = "openai"
    settings.CHAT_OPENAI_BASE_URL = server.url
    settings.CHAT_OPENAI_MODEL = "m"
    settings.CHAT_FINAL_SAVE_RETRY_S = 1.0
    reset_engines()
    server.chunks = [*TEXT, usage_chunk(usage)]

    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="Say hello.")
    events = await socket.receive_until(finished, timeout=BOUND)
    final = events[-1]["message"]
    assert streamed_text(events) == "Hello world"
    assert (final["status"], final["content"]) == ("complete", "Hello world")
    row = await database_sync_to_async(conversation.messages.get)(role=Message.Role.ASSISTANT)
    assert (row.status, row.content, row.completion_tokens) == ("complete", "Hello world", 2)
    assert row.prompt_tokens is not None and 0 < row.prompt_tokens < 100, "the count we made"

    # The engine's own result: what the server counted is dropped, ours stands.
    stream = OpenAIEngine(
        base_url=server.url, api_key="", model="m", timeout=5.0, context_tokens=2048
    ).stream([ChatMessage("user", "Hi")], SamplingParams(), request_id="r", prompt_tokens=3)
    async with asyncio.timeout(BOUND), aclosing(aiter(stream)) as deltas:
        assert "".join([delta async for delta in deltas]) == "Hello world"
    assert (stream.result.prompt_tokens, stream.result.completion_tokens) == (3, 2)


NOT_TEXT = [{"type": "text", "text": "hi"}, ["hi"], 5, True]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("content", NOT_TEXT, ids=[json.dumps(c) for c in NOT_TEXT])
async def test_finding_8_content_that_is_not_text_ends_the_reply_with_its_text_kept(
    connect: Any,
    alice: Any,
    conversation: Any,
    server: ScriptedServer,
    settings: Any,
    content: Any,
) -> None:
    """A chunk whose content is not text is an engine error; the text shown before it stays."""
    settings.CHAT_ENGINE = "openai"
    settings.CHAT_OPENAI_BASE_URL = server.url
    settings.CHAT_OPENAI_MODEL = "m"
    settings.CHAT_FINAL_SAVE_RETRY_S = 1.0
    reset_engines()
    server.chunks = [text_chunk("Hello "), text_chunk(content), *TEXT]

    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="Say hello.")
    events = await socket.receive_until(finished, timeout=BOUND)
    final = events[-1]["message"]
    assert streamed_text(events) == "Hello "
    assert (final["status"], final["content"]) == ("error", "Hello ")
    assert final["error"] == "The model server sent a reply that could not be read."
    row = await database_sync_to_async(conversation.messages.get)(role=Message.Role.ASSISTANT)
    assert (row.status, row.content) == ("error", "Hello ")

    stream = OpenAIEngine(
        base_url=server.url, api_key="", model="m", timeout=5.0, context_tokens=2048
    ).stream([ChatMessage("user", "Hi")], SamplingParams(), request_id="r")
    parts: list[str] = []
    with pytest.raises(EngineError) as raised:
        async with asyncio.timeout(BOUND), aclosing(aiter(stream)) as deltas:
            async for delta in deltas:
                parts.append(delta)
    assert parts == ["Hello "]
    assert str(raised.value) == "The model server sent a reply that could not be read."
    assert "content that is not text" in raised.value.detail

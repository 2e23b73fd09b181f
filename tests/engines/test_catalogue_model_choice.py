"""Sends pick a model: each reply uses the conversation's model and settings, and records them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from channels.db import database_sync_to_async

from conversations.engines import get_engine
from conversations.engines.base import ChatMessage
from conversations.models import Conversation, Message
from tests.support.replies import full_reply
from tests.support.sockets import finished

pytestmark = [pytest.mark.django_db(transaction=True)]


def engine_saw(spec: Any, reply: dict[str, Any]) -> Any:
    """What the model's engine itself was asked for this reply (the scripted engine's record)."""
    return get_engine(spec).records[reply["request_id"]]  # type: ignore[attr-defined]


async def replies_of(conversation: Any) -> list[Message]:
    rows = Message.objects.filter(conversation=conversation, role="assistant").order_by("pk")
    return await database_sync_to_async(list)(rows)


async def test_two_models_answer_in_one_conversation(
    connect: Any, alice: Any, conversation: Any, two_models: Any
) -> None:
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="Hello", model="careful")
    careful = (await socket.receive_until(finished))[-1]["message"]
    await socket.send(action="send", content="And you?", model="quick")
    quick = (await socket.receive_until(finished))[-1]["message"]
    await socket.send(action="send", content="Who answers now?")  # no model: the last one picked
    again = (await socket.receive_until(finished))[-1]["message"]

    assert [careful["content"], quick["content"], again["content"]] == [
        full_reply(7),
        full_reply(5),
        full_reply(5),
    ]
    rows = await replies_of(conversation)
    assert [(r.model_slug, r.engine, r.model) for r in rows] == [
        ("careful", "scripted", "careful-1"),
        ("quick", "scripted", "quick-1"),
        ("quick", "scripted", "quick-1"),
    ]
    assert careful["model_slug"] == "careful" and quick["model_slug"] == "quick"
    await database_sync_to_async(conversation.refresh_from_db)()
    assert conversation.model_slug == "quick"

    # Each engine saw its own model's system prompt and sampling, and the whole history.
    seen = engine_saw(two_models["quick"], quick)
    assert seen.messages[0] == ChatMessage("system", "Answer quickly.")
    assert [m.content for m in seen.messages[1:]] == ["Hello", full_reply(7), "And you?"]
    assert (seen.params.temperature, seen.params.max_tokens) == (0.2, 64)
    assert engine_saw(two_models["careful"], careful).messages[0].content == "Think it through."


async def test_a_conversation_s_own_settings_reach_the_engine(
    connect: Any, alice: Any, two_models: Any
) -> None:
    conversation = await database_sync_to_async(Conversation.objects.create)(
        owner=alice,
        model_slug="quick",
        system_prompt="Reply in French.",
        temperature=0.5,
        max_tokens=3,
    )
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="Bonjour")
    reply = (await socket.receive_until(finished))[-1]["message"]

    seen = engine_saw(two_models["quick"], reply)
    assert seen.messages[0] == ChatMessage("system", "Reply in French.")
    assert (seen.params.temperature, seen.params.max_tokens) == (0.5, 3)
    assert reply["content"] == full_reply(3) and reply["finish_reason"] == "length"
    (row,) = await replies_of(conversation)
    assert (row.system_prompt, row.temperature, row.max_tokens) == ("Reply in French.", 0.5, 3)


async def test_an_empty_system_prompt_sends_none(connect: Any, alice: Any, two_models: Any) -> None:
    conversation = await database_sync_to_async(Conversation.objects.create)(
        owner=alice, system_prompt=""
    )
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="Hi")
    reply = (await socket.receive_until(finished))[-1]["message"]
    assert engine_saw(two_models["quick"], reply).messages == [ChatMessage("user", "Hi")]


@pytest.mark.parametrize("model", ["internal", "nope", "x" * 51, 7])
async def test_a_model_that_is_not_yours_is_refused(
    connect: Any, alice: Any, conversation: Any, two_models: Any, model: Any
) -> None:
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="Hello", model=model)
    error = await socket.receive()
    assert error["type"] == "error"
    assert error["code"] in {"model_unavailable", "bad_model"}
    assert await database_sync_to_async(Message.objects.count)() == 0, "nothing was sent"


async def test_a_reply_waiting_for_its_model_to_load_says_so(
    connect: Any, alice: Any, conversation: Any, settings: Any
) -> None:
    settings.CHAT_MODELS = json.dumps(
        [{"slug": "slow", "backend": "scripted", "options": {"tokens": 3, "load_s": 1.0}}]
    )
    page, _, _ = await connect(alice, conversation.pk, json_protocol=False)
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="Hello")
    events = await socket.receive_until(finished)
    assert events[0]["type"] == "message.started" and events[0]["model_loading"] is True
    assert events[-1]["message"]["status"] == "complete", "it waited, and was not given up"
    fragment = ""
    while "message assistant" not in fragment:  # after the state sent on connect
        fragment = await page.communicator.receive_from(timeout=5)
    assert "loading the model…" in fragment

    await socket.send(action="send", content="Again")
    events = await socket.receive_until(finished)
    assert events[0]["model_loading"] is False

"""Streaming efficiency and what the engine is given."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.layers import channel_layers

from conversations.engines.base import ChatMessage
from conversations.engines.scripted import scripted_token
from conversations.engines.specs import ReplySettings
from conversations.models import Conversation, Message
from conversations.services.branches import link_as_a_line
from conversations.services.prompt import build_prompt, load_history
from tests.support.replies import full_reply, only_reply_of
from tests.support.sockets import finished, streamed_text

pytestmark = [pytest.mark.django_db(transaction=True)]


async def test_the_first_token_goes_out_alone_and_later_ones_are_coalesced(
    connect: Any, alice: Any, conversation: Any, scripted_engine: Any, settings: Any
) -> None:
    settings.CHAT_COALESCE_MS = 30
    # Coalescing is the generation's own doing; the in-memory layer keeps the count exact.
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    channel_layers.backends.clear()
    scripted_engine.tokens = 300
    scripted_engine.delay_s = 0  # as fast as the engine can
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="go")
    events = await socket.receive_until(finished)
    deltas = [e for e in events if e["type"] == "message.delta"]
    assert deltas[0]["text"] == scripted_token(0), "the first token is not held back"
    assert len(deltas) < 30, f"300 tokens came in {len(deltas)} frames"
    assert streamed_text(events) == full_reply(300)


async def test_partial_text_is_in_the_database_while_streaming(
    connect: Any, alice: Any, conversation: Any, scripted_engine: Any, settings: Any
) -> None:
    settings.CHAT_FLUSH_INTERVAL_S = 0.1
    scripted_engine.tokens = 1000
    scripted_engine.delay_s = 0.005
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="go")
    await socket.receive_until(lambda e: e["type"] == "message.delta" and e["offset"] > 100)
    await asyncio.sleep(0.3)
    row = await only_reply_of(conversation)
    assert row.status == Message.Status.STREAMING
    assert len(row.content) > 100 and row.heartbeat_at is not None
    await socket.send(action="cancel")
    await socket.receive_until(finished)


async def test_a_new_conversation_is_titled_from_its_first_message(
    connect: Any, alice: Any, conversation: Any
) -> None:
    await database_sync_to_async(Conversation.objects.filter(pk=conversation.pk).update)(title="")
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="  How do   tides work?  ")
    await socket.receive_until(finished)
    await database_sync_to_async(conversation.refresh_from_db)()
    assert conversation.title == "How do tides work?"


def test_the_oldest_turns_are_dropped_when_the_history_does_not_fit(
    alice: Any, settings: Any, scripted_engine: Any
) -> None:
    reply_settings = ReplySettings(system_prompt="Be brief.", temperature=0.7, max_tokens=100)
    scripted_engine.context_tokens = 260  # room for about 150 tokens of history
    conversation = Conversation.objects.create(owner=alice)
    for i in range(10):
        Message.objects.create(
            conversation=conversation, role="user", content=f"question {i} " + "x" * 80
        )
        Message.objects.create(
            conversation=conversation, role="assistant", content=f"answer {i} " + "y" * 80
        )
    Message.objects.create(conversation=conversation, role="user", content="the newest question")
    reply = Message.objects.create(conversation=conversation, role="assistant", status="pending")

    link_as_a_line(conversation.pk)  # as the first send on rows written as a list does
    reply.refresh_from_db()
    history = load_history(conversation.pk, leaf=reply.parent_id)
    chat = build_prompt(history=history, engine=scripted_engine, reply=reply_settings).messages
    assert chat[0] == ChatMessage("system", "Be brief.")
    assert chat[-1] == ChatMessage("user", "the newest question")
    assert 2 < len(chat) < 21
    assert chat[1].role == "user", "history never starts with a reply"
    assert "question 9" in chat[-3].content and "answer 9" in chat[-2].content
    assert all("question 0" not in m.content for m in chat)

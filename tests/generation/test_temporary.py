"""Temporary chats: deleted once their last reply has ended and no tab answers for them, with
the sockets and the channel layer of this process (the browser's view: tests/pages)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from channels.db import database_sync_to_async

from conversations.generation import temporary
from conversations.models import Conversation, Message, TokenUsage
from tests.support.replies import wait_for_status
from tests.support.sockets import finished

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture
def quick_sweeps(settings: Any) -> None:
    settings.CHAT_TEMPORARY_GRACE_S = 0.0
    settings.CHAT_FLUSH_INTERVAL_S = 0.1
    settings.CHAT_DISCONNECT_GRACE_S = 0.5


@pytest.fixture
def temporary_chat(alice: Any) -> Conversation:
    return Conversation.objects.create(owner=alice, title="Passing thought", temporary=True)


async def exists(conversation: Conversation) -> bool:
    found: bool = await database_sync_to_async(
        Conversation.objects.filter(pk=conversation.pk).exists
    )()
    return found


async def wait_until_gone(conversation: Conversation, timeout: float = 20) -> None:
    async with asyncio.timeout(timeout):
        while await exists(conversation):  # noqa: ASYNC110 - the deletion is the sweep's own
            await asyncio.sleep(0.05)


async def test_it_is_kept_while_a_tab_is_open_and_deleted_once_it_leaves(
    connect: Any, alice: Any, temporary_chat: Conversation, quick_sweeps: None
) -> None:
    socket, connected, _ = await connect(alice, temporary_chat.pk)
    assert connected
    await socket.send(action="send", content="hello")
    await socket.receive_until(finished)

    assert not await temporary.sweep(temporary_chat.pk)  # the open tab answers
    assert await exists(temporary_chat)

    await socket.close()
    await wait_until_gone(temporary_chat)
    usage = await database_sync_to_async(TokenUsage.objects.get)(user=alice)
    assert usage.replies == 1 and usage.completion_tokens == 40


async def test_a_reply_running_after_its_tab_left_keeps_it_until_the_reply_ends(
    connect: Any,
    alice: Any,
    temporary_chat: Conversation,
    scripted_engine: Any,
    quick_sweeps: None,
) -> None:
    scripted_engine.tokens = 10_000
    socket, _, _ = await connect(alice, temporary_chat.pk)
    await socket.send(action="send", content="go on and on")
    await socket.receive_until(lambda e: e["type"] == "message.delta")
    await socket.close()

    # The tab's own sweep finds the reply still being written and leaves the chat to its end.
    assert not await temporary.sweep(temporary_chat.pk)
    row = await wait_for_status(temporary_chat, Message.Status.CANCELLED)
    assert row.cancelled_by == "disconnect"
    await wait_until_gone(temporary_chat)
    usage = await database_sync_to_async(TokenUsage.objects.get)(user=alice)
    assert usage.replies == 1 and usage.cancelled == 1
    assert usage.completion_tokens == row.completion_tokens > 0


async def test_a_conversation_that_is_not_temporary_stays(
    connect: Any, alice: Any, conversation: Conversation, quick_sweeps: None
) -> None:
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="hello")
    await socket.receive_until(finished)
    await socket.close()

    assert not await temporary.sweep(conversation.pk)
    assert await exists(conversation)


async def test_a_stranger_s_socket_is_refused_and_does_not_answer_for_it(
    connect: Any, charlie: Any, temporary_chat: Conversation, quick_sweeps: None
) -> None:
    socket, _, _ = await connect(charlie, temporary_chat.pk)
    assert (await socket.communicator.receive_output(timeout=2))["code"] == 4403

    assert await temporary.sweep(temporary_chat.pk)
    assert not await exists(temporary_chat)

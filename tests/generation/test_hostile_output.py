"""A model's output that a database cannot store as it is (issue 23, finding 6): a NUL, which
PostgreSQL refuses in text, and a lone surrogate, which UTF-8 cannot encode."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.db import connection

from conversations.generation import rows, titles
from conversations.generation.recovery import replies_mark_interrupted
from conversations.models import Conversation, Message
from conversations.services import text
from tests.support.replies import wait_for_reply
from tests.support.sockets import Socket, finished
from tests.support.stepped import SteppedStream

pytestmark = [pytest.mark.django_db(transaction=True)]

HOSTILE = "a NUL \x00 and a lone \ud800 surrogate "
HOSTILE_STORED = "a NUL  and a lone \ufffd surrogate "  # as a browser shows it
HEALTHY = "a healthy reply "
END = "the end."


@dataclass
class Reply:
    conversation: Conversation
    socket: Socket
    stream: SteppedStream


@asynccontextmanager
async def two_users_replying(
    connect: Callable[..., Any], users: dict[str, Any], stepped_engine: Any
) -> AsyncIterator[dict[str, Reply]]:
    """alice and bob each send in a conversation of their own: two replies in this process, in
    the same keep-alive rounds. Both are ended (END) when the block is left."""
    replies = {}
    for name in ("alice", "bob"):
        conversation = await database_sync_to_async(Conversation.objects.create)(
            owner=users[name], title=f"{name}'s chat"
        )
        socket, _, _ = await connect(users[name], conversation.pk)
        await socket.send(action="send", content=f"Hi, I am {name}")
        stream = await stepped_engine.next_stream()
        assert name in stream.messages[-1].content
        replies[name] = Reply(conversation, socket, stream)
    try:
        yield replies
    finally:
        for reply in replies.values():
            reply.stream.emit(END)
            reply.stream.end()


async def finals(replies: dict[str, Reply]) -> dict[str, tuple[str, str]]:
    """Each user's finished reply as the tab got it, and as it is saved: (status, text)."""
    shown = {}
    for name, reply in replies.items():
        message = (await reply.socket.receive_until(finished))[-1]["message"]
        shown[name] = (message["status"], message["content"])
    saved = await database_sync_to_async(
        lambda: {
            row.conversation.owner.username: (row.status, row.content)
            for row in Message.objects.filter(role=Message.Role.ASSISTANT).select_related(
                "conversation__owner"
            )
        }
    )()
    assert saved == shown, "what is saved is what the tabs got"
    return shown


async def test_finding_6_nul_and_a_lone_surrogate_spare_another_users_reply(
    connect: Any, users: dict[str, Any], stepped_engine: Any, settings: Any
) -> None:
    """bob's model writes a NUL and a lone surrogate: his reply streams and is saved as a browser
    shows it, and alice's, flushed in the same keep-alive rounds, is written and never
    interrupted. (Before: every round's one transaction failed on bob's text, alice's heartbeat
    went stale, and recovery marked her reply interrupted.)"""
    settings.CHAT_FLUSH_INTERVAL_S = 0.05
    settings.CHAT_HEARTBEAT_TIMEOUT_S = 1.0
    async with two_users_replying(connect, users, stepped_engine) as replies:
        replies["bob"].stream.emit(HOSTILE)
        replies["alice"].stream.emit(HEALTHY)
        await wait_for_reply(replies["alice"].conversation, lambda row: row.content == HEALTHY, 3)
        await wait_for_reply(
            replies["bob"].conversation, lambda row: row.content == HOSTILE_STORED, 3
        )
        await asyncio.sleep(settings.CHAT_HEARTBEAT_TIMEOUT_S * 1.5)  # heartbeats go on
        assert await database_sync_to_async(replies_mark_interrupted)() == 0
    assert await finals(replies) == {
        "alice": ("complete", HEALTHY + END),
        "bob": ("complete", HOSTILE_STORED + END),
    }


async def test_finding_6_a_row_that_refuses_its_flush_fails_alone(
    connect: Any,
    users: dict[str, Any],
    stepped_engine: Any,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Whatever a row refuses (here bob's text, let through unrepaired), the keep-alive round
    writes the other replies of the process: alice's text and heartbeat."""
    settings.CHAT_FLUSH_INTERVAL_S = 0.05
    settings.CHAT_HEARTBEAT_TIMEOUT_S = 1.0
    # What each database refuses, and the channel layer carries to bob's tab: PostgreSQL a NUL,
    # SQLite (its driver) a lone surrogate.
    poison = "\x00" if connection.vendor == "postgresql" else "\ud800"

    def unrepaired(text: str) -> str:
        return text

    async with two_users_replying(connect, users, stepped_engine) as replies:
        with monkeypatch.context() as patched:
            # raising=False: the same test ran before make_storable existed.
            patched.setattr(text.StorableDeltas, "feed", _unrepaired_delta, raising=False)
            patched.setattr(rows, "make_storable", unrepaired, raising=False)
            replies["bob"].stream.emit(f"refused {poison} ")
            replies["alice"].stream.emit(HEALTHY)
            alice = replies["alice"].conversation
            await wait_for_reply(alice, lambda row: row.content == HEALTHY, 3)
            await asyncio.sleep(settings.CHAT_HEARTBEAT_TIMEOUT_S * 1.5)
            recover = database_sync_to_async(replies_mark_interrupted)
            assert await recover(conversation=alice) == 0
            bob_row = await wait_for_reply(replies["bob"].conversation, lambda row: True)
            assert bob_row.content == "", "bob's text never reached his row"
        # Left: bob's final save repairs his text.
    assert (await finals(replies))["alice"] == ("complete", HEALTHY + END)


def _unrepaired_delta(self: Any, delta: str) -> str:
    return delta


def test_finding_6_a_title_the_model_writes_is_storable() -> None:
    assert titles.clean('Title: "Nul\x00 and \ud800 here."') == "Nul and \ufffd here"

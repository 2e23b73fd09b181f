"""A user holds at most CHAT_SOCKETS_PER_USER sockets open, counted across every process."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from channels.db import database_sync_to_async
from websockets.exceptions import ConnectionClosed

from conversations.models import Conversation
from conversations.sockets import slots
from conversations.sockets.consumer import CLOSE_TOO_MANY_SOCKETS
from tests.support.servers import NEEDS_SHARED_SERVICES, open_socket, servers, session_cookie
from tests.support.sockets import LiveSocket

pytestmark = [pytest.mark.django_db(transaction=True)]


async def test_a_socket_over_the_limit_is_told_why_and_closed_and_one_closing_frees_a_place(
    connect: Any, alice: Any, users: dict[str, Any], conversation: Conversation, settings: Any
) -> None:
    settings.CHAT_SOCKETS_PER_USER = 2
    first, _, _ = await connect(alice, conversation.pk)
    second, _, _ = await connect(alice, conversation.pk)
    third, _, _ = await connect(alice, conversation.pk)
    for socket in (first, second):
        assert await answers(socket)

    refusal = await third.receive()
    assert (refusal["type"], refusal["code"]) == ("error", "too_many_sockets")
    closing = await third.communicator.receive_output(timeout=2)
    assert (closing["type"], closing["code"]) == ("websocket.close", CLOSE_TOO_MANY_SOCKETS)

    bobs = await database_sync_to_async(Conversation.objects.create)(owner=users["bob"])
    bob, _, _ = await connect(users["bob"], bobs.pk)
    assert await answers(bob), "another user's sockets are counted apart"

    await first.close()
    fourth, _, _ = await connect(alice, conversation.pk)
    assert await answers(fourth)


async def answers(socket: Any) -> bool:
    """The socket is open and acts on frames (JSON sockets send nothing until asked)."""
    await socket.send(action="cancel")
    return bool((await socket.receive())["code"] == "nothing_to_cancel")


async def test_a_slot_left_by_a_killed_process_frees_itself_when_its_lease_lapses(
    alice: Any, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.CHAT_SOCKETS_PER_USER = 1
    monkeypatch.setattr(slots, "LEASE_S", 1)
    assert await slots.claim(alice.pk, "a-socket-of-a-process-that-died")
    assert await slots.claim(alice.pk, "a-new-socket") is None
    await asyncio.sleep(1.5)
    assert await slots.claim(alice.pk, "a-new-socket") is not None


@pytest.mark.processes
@NEEDS_SHARED_SERVICES
async def test_the_limit_holds_across_processes(
    alice: Any, conversation: Conversation, tmp_path: Path
) -> None:
    cookie = await database_sync_to_async(session_cookie)(alice)
    with servers(2, tmp_path, CHAT_SOCKETS_PER_USER=2) as (a, b):
        async with open_socket(a, conversation.pk, cookie) as on_a:
            async with open_socket(b, conversation.pk, cookie) as on_b:
                for ws in (on_a, on_b):
                    assert await answers(LiveSocket(ws))
                async with open_socket(a, conversation.pk, cookie) as third:
                    refusal = await LiveSocket(third).receive()
                    assert refusal["code"] == "too_many_sockets"
                    with pytest.raises(ConnectionClosed) as closed:
                        await third.recv()
                    assert closed.value.rcvd is not None
                    assert closed.value.rcvd.code == CLOSE_TOO_MANY_SOCKETS
            # b's socket closed: its slot is free for a socket on a.
            async with open_socket(a, conversation.pk, cookie) as again:
                assert await answers(LiveSocket(again))

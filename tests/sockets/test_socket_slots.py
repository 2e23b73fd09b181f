"""A user holds at most CHAT_SOCKETS_PER_USER sockets open, counted across every process."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest
from autobahn.exception import PayloadExceededError
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from conversations.models import Conversation, Message
from conversations.sockets import slots
from conversations.sockets.consumer import CLOSE_TOO_MANY_SOCKETS
from conversations.sockets.routing import websocket_urlpatterns
from tests.support.servers import (
    NEEDS_SHARED_SERVICES,
    open_socket,
    servers,
    session_cookie,
)
from tests.support.sockets import (
    DAPHNE_MAX_MESSAGE_BYTES,
    LiveSocket,
    conversation_communicator,
    open_page_socket,
    refusing_frames_as_daphne_does,
    signed_in_session,
)

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


async def conversation_with_a_reply_too_big_to_send(owner: Any) -> Conversation:
    """A reply over daphne's limit; the tests that send it raise CHAT_SOCKET_FRAME_BYTES above
    that limit, so the frame it is rendered to is one the server refuses and the handler crashes."""
    too_big: Conversation = await database_sync_to_async(Conversation.objects.create)(owner=owner)
    await database_sync_to_async(Message.objects.create)(
        conversation=too_big,
        role=Message.Role.ASSISTANT,
        content="x" * (DAPHNE_MAX_MESSAGE_BYTES + 1),
    )
    return too_big


async def codes_answered(sockets: list[Any]) -> list[str]:
    """What each socket first says to a cancel: nothing_to_cancel from an open one."""
    for socket in sockets:
        await socket.send(action="cancel")
    return [(await socket.receive())["code"] for socket in sockets]


async def test_finding_5_a_handler_that_crashes_frees_its_socket_slot(
    connect: Any, alice: Any, conversation: Conversation, settings: Any
) -> None:
    """A socket whose handler raises (here: the opening frame of a conversation whose last
    reply is over the server's frame limit) ends without Channels calling disconnect(); its
    slot is free all the same, however many crash."""
    settings.CHAT_SOCKETS_PER_USER = 3
    settings.CHAT_SOCKET_FRAME_BYTES = 8 * DAPHNE_MAX_MESSAGE_BYTES
    too_big = await conversation_with_a_reply_too_big_to_send(alice)
    session_key = await database_sync_to_async(signed_in_session)(alice)
    application = refusing_frames_as_daphne_does(URLRouter(websocket_urlpatterns))
    crashes = 2 * settings.CHAT_SOCKETS_PER_USER
    for crash in range(1, crashes + 1):
        # The tab's page (not a JSON client, which reads history over HTTP) is sent the reply.
        crashing = conversation_communicator(
            alice, too_big.pk, session_key=session_key, json_protocol=False, application=application
        )
        connected, _ = await crashing.connect(timeout=10)
        assert connected
        assert await how_it_ends(crashing) == "crashed", f"socket {crash} of {crashes}"

    cap = settings.CHAT_SOCKETS_PER_USER
    sockets = [(await connect(alice, conversation.pk))[0] for _ in range(cap)]
    assert await codes_answered(sockets) == ["nothing_to_cancel"] * cap


async def how_it_ends(communicator: WebsocketCommunicator) -> str:
    """How the socket ended: "crashed" when its handler raised on the frame over the limit."""
    await asyncio.wait([communicator.future], timeout=10)
    if not communicator.future.done():
        return f"still open, having sent {await communicator.receive_output()}"
    ended = communicator.future.exception()
    return "crashed" if isinstance(ended, PayloadExceededError) else f"ended with {ended!r}"


async def test_finding_5_a_socket_whose_task_is_cancelled_frees_its_slot(
    connect: Any, alice: Any, conversation: Conversation, settings: Any
) -> None:
    """A socket whose task is cancelled (daphne cancels one still running a while after its
    client left) frees its slot too."""
    settings.CHAT_SOCKETS_PER_USER = 2
    session_key = await database_sync_to_async(signed_in_session)(alice)
    for _ in range(2 * settings.CHAT_SOCKETS_PER_USER):
        cancelled = conversation_communicator(alice, conversation.pk, session_key=session_key)
        connected, _ = await cancelled.connect(timeout=10)
        assert connected
        await cancelled_task(cancelled)

    cap = settings.CHAT_SOCKETS_PER_USER
    sockets = [(await connect(alice, conversation.pk))[0] for _ in range(cap)]
    assert await codes_answered(sockets) == ["nothing_to_cancel"] * cap


async def cancelled_task(communicator: WebsocketCommunicator) -> None:
    communicator.future.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await communicator.future


@pytest.mark.processes
@NEEDS_SHARED_SERVICES
async def test_finding_5_sockets_that_crash_on_a_live_server_free_their_slots(
    alice: Any, conversation: Conversation, tmp_path: Path
) -> None:
    """Daphne itself refuses the frame over its limit (CHAT_SOCKET_FRAME_BYTES set above it):
    the handler sending it crashes, the client is closed with 1011, and the slot is free again."""
    too_big = await conversation_with_a_reply_too_big_to_send(alice)
    cookie = await database_sync_to_async(session_cookie)(alice)
    cap = 2
    over_the_limit = 8 * DAPHNE_MAX_MESSAGE_BYTES
    with servers(
        1, tmp_path, CHAT_SOCKETS_PER_USER=cap, CHAT_SOCKET_FRAME_BYTES=over_the_limit
    ) as (server,):
        for crash in range(1, 2 * cap + 1):
            async with open_page_socket(server, too_big.pk, cookie) as crashing:
                assert await how_the_server_ends(crashing) == "closed 1011", f"crash {crash}"
        async with (
            open_socket(server, conversation.pk, cookie) as first,
            open_socket(server, conversation.pk, cookie) as second,
        ):
            sockets = [LiveSocket(first), LiveSocket(second)]
            assert await codes_answered(sockets) == ["nothing_to_cancel"] * cap


async def how_the_server_ends(connection: ClientConnection) -> str:
    """How the server ended the socket: "closed <code>" when it closed before sending a frame."""
    try:
        frame = await asyncio.wait_for(connection.recv(), 10)
    except ConnectionClosed as closed:
        return f"closed {closed.rcvd.code if closed.rcvd else None}"
    return f"still open, having sent {frame!r}"

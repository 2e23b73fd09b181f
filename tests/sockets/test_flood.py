"""A socket that floods frames is slowed, then closed, before any frame reaches the database;
frames waiting for the database are bounded."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async

from conversations.models import Conversation, Message
from conversations.sockets.consumer import CLOSE_POLICY_VIOLATION
from conversations.sockets.throttle import FrameBucket, SocketFrames
from tests.support.sockets import finished

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_the_bucket_allows_a_burst_then_the_rate() -> None:
    bucket = FrameBucket(per_second=2, burst=3)
    assert [bucket.allow(now=10.0) for _ in range(4)] == [True, True, True, False]
    assert bucket.refused_in_a_row == 1
    assert bucket.allow(now=10.5), "half a second earns one frame at 2 a second"
    assert not bucket.allow(now=10.5)
    assert bucket.allow(now=100.0) and bucket.refused_in_a_row == 0


def test_a_socket_refused_more_frames_in_a_row_than_its_burst_is_flooding() -> None:
    frames = SocketFrames(2**40, socket=(1, 3), user=(1_000, 1_000))  # a user of its own
    assert [frames.allow(now=10.0) for _ in range(6)] == [True] * 3 + [False] * 3
    assert not frames.flooding, "as many refused as a burst: slowed down, not closed"
    assert not frames.allow(now=10.0) and frames.flooding
    assert frames.allow(now=20.0) and not frames.flooding, "a frame allowed starts over"


async def test_a_flood_is_answered_slow_down_then_closed_and_another_socket_still_streams(
    connect: Any,
    alice: Any,
    users: dict[str, Any],
    conversation: Conversation,
    settings: Any,
) -> None:
    settings.CHAT_SOCKET_FRAMES_PER_SECOND = 1
    settings.CHAT_SOCKET_FRAME_BURST = 3
    flooder, _, _ = await connect(alice, conversation.pk)
    for _ in range(3):  # the burst: real work (nothing to cancel)
        await flooder.send(action="cancel")
        assert (await flooder.receive())["code"] == "nothing_to_cancel"
    for _ in range(3):
        await flooder.send(action="cancel")
        assert (await flooder.receive())["code"] == "slow_down"
    await flooder.send(action="cancel")
    closing = await flooder.communicator.receive_output(timeout=2)
    assert (closing["type"], closing["code"]) == ("websocket.close", CLOSE_POLICY_VIOLATION)

    bob = users["bob"]
    bobs = await database_sync_to_async(Conversation.objects.create)(owner=bob)
    other, _, _ = await connect(bob, bobs.pk)
    await other.send(action="send", content="hello")
    assert (await other.receive())["type"] == "message.started"
    # Let the reply end here: a generation still running when the test's loop closes hangs it.
    await other.receive_until(finished)


async def test_a_refused_send_saves_nothing(
    connect: Any, alice: Any, conversation: Conversation, settings: Any
) -> None:
    settings.CHAT_SOCKET_FRAMES_PER_SECOND = 0.1
    settings.CHAT_SOCKET_FRAME_BURST = 1
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="first")
    assert (await socket.receive())["type"] == "message.started"
    await socket.send(action="send", content="second")
    events = await socket.receive_until(lambda e: e["type"] == "error")
    assert events[-1]["code"] == "slow_down"
    assert await database_sync_to_async(Message.objects.filter(content="second").count)() == 0
    await socket.receive_until(finished)  # the first reply ends before the test does


async def test_frames_waiting_for_a_busy_database_are_bounded_and_the_rest_answered_busy(
    connect: Any, alice: Any, conversation: Conversation, settings: Any
) -> None:
    """While the process's database thread is taken (another user's slow query), a socket's
    frames wait in a queue of CHAT_SOCKET_QUEUED_FRAMES; the rest are answered at once rather
    than kept in memory, and the queued ones are acted on when the database is free."""
    settings.CHAT_SOCKET_QUEUED_FRAMES = 3
    socket, _, _ = await connect(alice, conversation.pk)
    database_free = threading.Event()
    # thread_sensitive: the one thread every database call of this process runs on.
    held = asyncio.create_task(sync_to_async(database_free.wait, thread_sensitive=True)())
    try:
        for _ in range(8):
            await socket.send(action="cancel")
        answered_at_once = []
        while not await socket.nothing_within(0.3):
            answered_at_once.append((await socket.receive())["code"])
        # One frame is being acted on (its session check waits for the thread), three wait.
        assert answered_at_once == ["busy"] * 4, "beyond the queue, answered without waiting"
    finally:
        database_free.set()
        await held
    after = [(await socket.receive(timeout=5))["code"] for _ in range(4)]
    assert after == ["nothing_to_cancel"] * 4, "the accepted frames, acted on once it was free"
    assert await socket.nothing_within(0.2)

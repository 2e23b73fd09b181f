"""A Stop reaches the engine before anything is written: the database thread may be busy with
other replies' flushes, and the engine must not go on generating while the Stop waits there."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from conversations.models import Conversation, Message
from tests.support.replies import only_reply_of
from tests.support.sockets import finished, is_delta

pytestmark = [pytest.mark.django_db(transaction=True)]


async def test_a_stop_reaches_the_engine_while_the_database_thread_is_busy(
    connect: Any, alice: Any, conversation: Conversation, stepped_engine: Any
) -> None:
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="go")
    stream = await stepped_engine.next_stream()
    stream.emit("Hello")
    await socket.receive_until(is_delta)

    database_free = threading.Event()
    # thread_sensitive: the one thread every database call of this process runs on, held as a
    # burst of other replies' flushes would hold it.
    held = asyncio.create_task(sync_to_async(database_free.wait, thread_sensitive=True)())
    try:
        await socket.send(action="cancel")
        async with asyncio.timeout(5):
            await stream.abort_requested.wait()
        assert not held.done(), "the engine was told while the database thread was still busy"
    finally:
        database_free.set()
        await held

    events = await socket.receive_until(finished)
    assert events[-1]["message"]["status"] == "cancelled"
    reply = await only_reply_of(conversation)
    assert reply.status == Message.Status.CANCELLED and reply.content == "Hello"
    assert reply.cancelled_by == "alice"

"""Where a reply's text ends (issue 23): at CHAT_MAX_REPLY_CHARS (finding 13), and at a stop,
where what is saved is what the tabs and the API client received (finding 16)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from channels.db import database_sync_to_async

from conversations.engines.catalogue import model_for
from conversations.events.protocol import Delta, Event
from conversations.gateway.call_reply import CallReply
from conversations.gateway.calls import call_start
from conversations.gateway.wire import parse_chat_call
from conversations.generation.coalescer import Coalescer, Frame
from conversations.generation.listeners import Listener
from conversations.models import Conversation, Message
from conversations.services.tokens import api_token_create
from tests.support.replies import generations_finished, only_reply_of, reply_of
from tests.support.sockets import finished, is_delta, streamed_text
from tests.support.stepped import SteppedStream

pytestmark = [pytest.mark.django_db(transaction=True)]

BOUND_S = 5.0  # keeps a broken generation from hanging the suite; not a speed requirement
HELD_BACK_MS = 60_000  # a frame after the first waits this long: it is held back for the test


async def taken(stream: SteppedStream, tokens: int) -> None:
    """Until the generation has taken `tokens` of what the engine produced (the stream counts a
    token as it hands it on; no time passes for the engine meanwhile)."""
    async with asyncio.timeout(BOUND_S):
        while stream.result.completion_tokens < tokens:  # noqa: ASYNC110 - the stream has no event
            await asyncio.sleep(0)


async def delta_at(listener: Listener, offset: int) -> None:
    """Read `listener` until the delta that starts at `offset`."""
    async with asyncio.timeout(BOUND_S):
        while True:
            event: Event | None = await listener.get()
            assert event is not None, "the reply ended first"
            if isinstance(event, Delta) and event.offset == offset:
                return


async def api_call(user: Any) -> CallReply:
    """A streamed /v1/chat/completions call, as the gateway's view starts it."""
    body = {"model": "default", "stream": True, "messages": [{"role": "user", "content": "Go"}]}
    model = await database_sync_to_async(model_for)(user, "default")
    token, _ = await database_sync_to_async(api_token_create)(user=user, name="tests")
    return await call_start(
        token=token,
        call=parse_chat_call(json.dumps(body).encode()),
        model=model,
        conversation_id=None,
        client="tests",
    )


async def saved_row(reply: CallReply) -> Message:
    await reply.running.finished()
    conversation = await database_sync_to_async(Conversation.objects.get)(
        pk=reply.plan.conversation_id
    )
    row: Message = await only_reply_of(conversation)
    return row


async def test_finding_13_a_reply_ends_complete_as_length_at_chat_max_reply_chars(
    connect: Any, alice: Any, conversation: Conversation, stepped_engine: Any, settings: Any
) -> None:
    settings.CHAT_MAX_REPLY_CHARS = 10
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="Write forever.")
    stream = await stepped_engine.next_stream()
    stream.emit("12345")
    stream.emit("67890 and on")  # reaches the limit: cut there
    stream.emit(" and on")  # written before the engine heard it must stop: not kept
    try:
        async with asyncio.timeout(BOUND_S):
            await stream.abort_requested.wait()
    except TimeoutError:
        pytest.fail("the engine was never told to stop at CHAT_MAX_REPLY_CHARS")
    events = await socket.receive_until(finished)

    saved = events[-1]["message"]
    assert saved["status"] == "complete" and saved["finish_reason"] == "length"
    assert saved["cancelled_by"] == "" and saved["cancel_requested_at"] is None
    assert streamed_text(events) == saved["content"] == "1234567890"
    row = await reply_of(conversation)
    assert row is not None and row.status == Message.Status.COMPLETE
    assert row.content == "1234567890" and row.finish_reason == "length"


async def test_finding_16_a_client_that_leaves_is_saved_what_it_received(
    alice: Any, stepped_engine: Any, settings: Any
) -> None:
    settings.CHAT_COALESCE_MS = HELD_BACK_MS
    try:
        reply = await api_call(alice)
        stream = await stepped_engine.next_stream()
        stream.emit("one ")  # the first token goes out at once
        received = await reply.next_text()
        stream.emit("two ")  # held back by the coalescer
        await taken(stream, 2)
        await reply.release()  # the client went away: the gateway stops the reply
        stream.emit("three ")  # the engine writes on until it hears the stop
        row = await saved_row(reply)
    finally:
        await generations_finished()

    assert row.status == Message.Status.CANCELLED and row.cancelled_by == "client_disconnect"
    assert row.content == received == "one "
    assert row.finish_reason == "abort"


async def test_finding_16_frames_a_client_left_unread_are_not_saved(
    alice: Any, stepped_engine: Any, settings: Any
) -> None:
    settings.CHAT_COALESCE_MS = 0  # every token is a frame of its own
    try:
        reply = await api_call(alice)
        watcher = reply.running.listen()  # sees each frame as the client's queue gets it
        stream = await stepped_engine.next_stream()
        stream.emit("one ")
        received = await reply.next_text()
        stream.emit("two ")
        await delta_at(watcher, offset=len("one "))  # in the client's queue too, not taken
        await reply.release()
        row = await saved_row(reply)
    finally:
        await generations_finished()

    assert row.status == Message.Status.CANCELLED and row.cancelled_by == "client_disconnect"
    assert row.content == received == "one "


async def test_finding_16_a_stop_keeps_the_text_the_tabs_were_sent(
    connect: Any, alice: Any, conversation: Conversation, stepped_engine: Any, settings: Any
) -> None:
    settings.CHAT_COALESCE_MS = HELD_BACK_MS
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="Hi")
    stream = await stepped_engine.next_stream()
    stream.emit("one ")
    seen = await socket.receive_until(is_delta)
    stream.emit("two ")  # held back by the coalescer when the Stop comes
    await taken(stream, 2)
    await socket.send(action="cancel")
    seen += await socket.receive_until(finished)

    saved = seen[-1]["message"]
    assert saved["status"] == "cancelled" and saved["cancelled_by"] == "alice"
    assert streamed_text(seen) == saved["content"] == "one "
    row = await reply_of(conversation)
    assert row is not None and row.content == "one "


async def test_finding_16_the_partial_save_holds_what_the_tabs_were_sent(
    connect: Any, alice: Any, conversation: Conversation, stepped_engine: Any, settings: Any
) -> None:
    settings.CHAT_COALESCE_MS = HELD_BACK_MS
    settings.CHAT_FLUSH_INTERVAL_S = 0.05
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="Hi")
    stream = await stepped_engine.next_stream()
    stream.emit("one ")
    seen = await socket.receive_until(is_delta)
    stream.emit("two ")  # held back: a reload now, or a crash, must not show it
    await taken(stream, 2)
    row = await reply_of(conversation)
    assert row is not None
    beats = {row.heartbeat_at}
    async with asyncio.timeout(BOUND_S):
        while len(beats) < 3:  # two flushes at least since "two " was taken
            await asyncio.sleep(settings.CHAT_FLUSH_INTERVAL_S)
            row = await reply_of(conversation)
            assert row is not None
            beats.add(row.heartbeat_at)
    assert row.content == streamed_text(seen) == "one "
    await socket.send(action="cancel")
    await socket.receive_until(finished)


def test_the_limit_cuts_the_text_and_takes_no_more() -> None:
    text = Coalescer(interval_s=0.03, shown="ab", max_chars=5)
    assert text.add("cdef") and text.full and text.dropped
    assert not text.add("g")
    assert text.take_frame(now=1.0) == Frame(2, "cde")
    text.stop()  # after the end: it stops nothing
    assert text.text == "abcde" and text.length == text.sent == 5


def test_a_stop_keeps_what_was_sent_or_what_a_reader_had() -> None:
    text = Coalescer(interval_s=0.03)
    text.add("one ")
    text.take_frame(now=1.0)
    text.add("two ")
    text.take_frame(now=2.0)
    text.add("three ")  # held back
    text.stop(received=len("one "))  # a reader that left had only the first frame
    assert not text.add("four ")
    assert text.text == text.snapshot() == "one " and text.length == text.sent == 4
    assert text.take_frame(now=3.0) is None and text.dropped and not text.full

"""The conversation socket: streaming, cancel from another tab, reconnects, refusals."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from channels.db import database_sync_to_async

from conversations.models import Message
from tests.support.replies import full_reply, only_reply_of
from tests.support.sockets import finished, streamed_text

pytestmark = [pytest.mark.django_db(transaction=True)]


async def test_it_streams_a_reply_and_saves_it(connect: Any, alice: Any, conversation: Any) -> None:
    socket, connected, _ = await connect(alice, conversation.pk)
    assert connected
    await socket.send(action="send", content="Hello there")
    events = await socket.receive_until(finished)

    assert events[0]["type"] == "message.started"
    assert events[0]["user_message"]["content"] == "Hello there"
    deltas = [e for e in events if e["type"] == "message.delta"]
    assert len(deltas) >= 2, "the reply streams in several frames"
    assert streamed_text(events) == full_reply(40)
    assert events[-1]["message"]["status"] == "complete"

    row = await only_reply_of(conversation)
    assert row.status == Message.Status.COMPLETE
    assert row.content == full_reply(40)
    assert row.completion_tokens == 40
    assert row.first_token_at is not None and row.finished_at is not None
    assert row.engine == "scripted" and len(row.request_id) == 32


async def test_it_cancels_from_another_tab(
    connect: Any, alice: Any, conversation: Any, settings: Any, scripted_engine: Any
) -> None:
    settings.CHAT_SCRIPTED_TOKENS = 1000
    scripted_engine.tokens = 1000
    first, _, _ = await connect(alice, conversation.pk)
    second, _, _ = await connect(alice, conversation.pk)
    await first.send(action="send", content="Count forever")
    first_events = await first.receive_until(lambda e: e["type"] == "message.delta")
    await second.receive_until(lambda e: e["type"] == "message.delta")

    await second.send(action="cancel")
    first_events += await first.receive_until(finished)
    second_events = await second.receive_until(finished)

    for events in (first_events, second_events):
        assert events[-1]["message"]["status"] == "cancelled"
    row = await only_reply_of(conversation)
    assert row.status == Message.Status.CANCELLED
    assert 0 < row.completion_tokens < 1000
    # What the tabs were sent, none of what the engine wrote after the Stop (issue 23, finding
    # 16): whole tokens, fewer than the engine counted where it wrote on.
    assert row.content == streamed_text(first_events)
    assert full_reply(row.completion_tokens).startswith(row.content)
    assert row.cancelled_by == "alice"
    assert row.cancel_latency_ms is not None and row.cancel_latency_ms >= 0
    assert row.cancel_confirmed_at >= row.cancel_requested_at
    record = scripted_engine.records[row.request_id]
    assert record.stop_requested_at is not None
    assert record.emitted_after_stop <= 2
    assert record.emitted == row.completion_tokens


async def test_it_refuses_a_second_send_while_streaming(
    connect: Any, alice: Any, conversation: Any, scripted_engine: Any
) -> None:
    scripted_engine.tokens = 200
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="first")
    await socket.receive_until(lambda e: e["type"] == "message.delta")
    await socket.send(action="send", content="second")
    events = await socket.receive_until(lambda e: e["type"] == "error")
    assert events[-1]["code"] == "reply_in_progress"
    await socket.send(action="cancel")
    await socket.receive_until(finished)
    count = await database_sync_to_async(conversation.messages.count)()
    assert count == 2, "the refused send saved nothing"


async def test_a_tab_that_connects_mid_reply_sees_everything_exactly_once(
    connect: Any, alice: Any, conversation: Any, scripted_engine: Any
) -> None:
    scripted_engine.tokens = 60
    first, _, _ = await connect(alice, conversation.pk)
    await first.send(action="send", content="Go")
    await first.receive_until(lambda e: e["type"] == "message.delta" and e["offset"] > 40)

    late, _, _ = await connect(alice, conversation.pk)
    late_events = await late.receive_until(finished)
    assert late_events[0]["type"] == "message.snapshot"
    assert len(late_events[0]["text"]) > 40
    assert streamed_text(late_events) == full_reply(60)


async def test_it_closes_the_socket_for_a_stranger(
    connect: Any, charlie: Any, conversation: Any
) -> None:
    socket, connected, _ = await connect(charlie, conversation.pk)
    assert connected  # accepted only to deliver the close code
    assert await socket.communicator.receive_output(timeout=2) == {
        "type": "websocket.close",
        "code": 4403,
    }


async def test_it_closes_the_socket_for_an_anonymous_user(connect: Any, conversation: Any) -> None:
    from django.contrib.auth.models import AnonymousUser

    socket, _, _ = await connect(AnonymousUser(), conversation.pk)
    output = await socket.communicator.receive_output(timeout=2)
    assert output["code"] == 4403


async def test_the_browser_gets_html_fragments(connect: Any, alice: Any, conversation: Any) -> None:
    socket, _, _ = await connect(alice, conversation.pk, json_protocol=False)
    settled = await socket.communicator.receive_from()  # the saved state on connect
    assert 'id="stop-button"' in settled and "disabled" in settled
    await socket.send(action="send", content="<b>hi</b>", HEADERS={"HX-Request": "true"})
    started = await socket.communicator.receive_from()
    assert 'hx-swap-oob="beforeend:#messages"' in started
    assert "&lt;b&gt;hi&lt;/b&gt;" in started and "<b>hi</b>" not in started
    delta = await socket.communicator.receive_from()
    # The block being written, rendered as it will be once whole, in place of the last render.
    assert 'hx-swap-oob="innerHTML"' in delta and "<p>alpha0" in delta
    await asyncio.sleep(0)


async def test_the_started_fragment_shows_the_new_title_everywhere(
    connect: Any, alice: Any, conversation: Any
) -> None:
    await database_sync_to_async(type(conversation).objects.filter(pk=conversation.pk).update)(
        title=""
    )
    socket, _, _ = await connect(alice, conversation.pk, json_protocol=False)
    await socket.communicator.receive_from()  # the saved state on connect
    await socket.send(action="send", content="Plan a picnic")
    started = await socket.communicator.receive_from()
    assert f'id="conversation-link-{conversation.pk}" href=' in started
    assert 'id="conversation-title"' in started and 'value="Plan a picnic"' in started

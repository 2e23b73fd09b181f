"""Issue 23, finding 5: a frame over daphne's 1 MiB limit crashed the socket's handler (opening a
conversation whose last reply is that long, switching to a branch that long). Every frame is now
within CHAT_SOCKET_FRAME_BYTES: a reply's text so far comes in pieces, a saved message too long
for a frame is a placeholder the page loads over HTTP, a long branch comes in several frames."""

from __future__ import annotations

import html
import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.test import Client
from django.utils.html import escape

from conversations.events.payloads import message_payload
from conversations.events.protocol import Started
from conversations.models import Conversation, Message
from conversations.sockets.html_renderer import HtmlRenderer
from conversations.sockets.renderers import JsonRenderer
from conversations.sockets.routing import websocket_urlpatterns
from tests.support.servers import NEEDS_SHARED_SERVICES, servers, session_cookie
from tests.support.sockets import (
    DAPHNE_MAX_MESSAGE_BYTES,
    conversation_communicator,
    open_page_socket,
    refusing_frames_as_daphne_does,
    signed_in_session,
)

pytestmark = [pytest.mark.django_db(transaction=True)]

FRAME_BYTES = 512 * 1024  # the default CHAT_SOCKET_FRAME_BYTES
# Each of these is six bytes once escaped (HTML's &quot;, JSON's \u0001): the worst case.
WORST_TEXT = '"\x01' * 120_000 + "done"
LOADER = re.compile(r'<article id="msg-(\d+)"[^>]* hx-get="([^"]+)" hx-trigger="load"')


def size(frame: str) -> int:
    return len(frame.encode())


def test_finding_5_a_long_reply_s_text_so_far_comes_to_a_json_client_in_pieces() -> None:
    frames = JsonRenderer(FRAME_BYTES).snapshot(7, WORST_TEXT)
    assert len(frames) > 1
    assert max(map(size, frames)) <= FRAME_BYTES
    events = [json.loads(frame) for frame in frames]
    assert events[0]["type"] == "message.snapshot" and events[0]["offset"] == 0
    # The client's rule: a snapshot's text, then each delta whose offset is the length it has.
    text = ""
    for event in events:
        assert event["offset"] == len(text)
        text += event["text"]
    assert text == WORST_TEXT


def test_finding_5_a_long_reply_s_text_so_far_comes_to_a_tab_in_pieces() -> None:
    frames = HtmlRenderer(uuid.uuid4(), FRAME_BYTES).snapshot(7, WORST_TEXT)
    assert len(frames) > 1
    assert max(map(size, frames)) <= FRAME_BYTES
    assert 'id="msg-7-body" hx-swap-oob="innerHTML"' in frames[0]
    assert all('id="msg-7-writing" hx-swap-oob="beforeend"' in frame for frame in frames[1:])
    assert "".join(_writing_text(frame) for frame in frames) == WORST_TEXT


def test_finding_5_a_continued_long_reply_starts_within_the_limit(alice: Any) -> None:
    """`continue` on a long reply starts with its text so far: the start, then its pieces."""
    conversation = Conversation.objects.create(owner=alice)
    reply = Message.objects.create(
        conversation=conversation, role="assistant", status="streaming", content=WORST_TEXT
    )
    event = Started(
        conversation_id=str(conversation.pk),
        message_id=reply.pk,
        title="",
        user_message=None,
        message=message_payload(reply),
        model_loading=False,
        after=None,
    )
    for renderer in (JsonRenderer(FRAME_BYTES), HtmlRenderer(conversation.pk, FRAME_BYTES)):
        frames = renderer.started(event)
        assert len(frames) > 2 and max(map(size, frames)) <= FRAME_BYTES
    json_frames = [json.loads(f) for f in JsonRenderer(FRAME_BYTES).started(event)]
    assert json_frames[0]["message"]["content"] == ""
    assert "".join(f["text"] for f in json_frames[1:]) == WORST_TEXT


def test_finding_5_a_json_client_is_told_to_read_a_long_finished_reply_over_the_api(
    alice: Any,
) -> None:
    conversation = Conversation.objects.create(owner=alice)
    reply = Message.objects.create(conversation=conversation, role="assistant", content=WORST_TEXT)
    (frame,) = JsonRenderer(FRAME_BYTES).finished(message_payload(reply))
    event = json.loads(frame)
    assert event["type"] == "message.finished" and event["message"]["id"] == reply.pk
    assert event["message"]["content"] is None and event["message"]["status"] == "complete"


async def test_finding_5_a_conversation_whose_last_reply_is_over_1_mib_opens(
    alice: Any, charlie: Any, settings: Any
) -> None:
    """Behind daphne's rule for outgoing frames, the page's socket opens on it and stays open;
    the reply comes as a placeholder whose URL serves it whole, to its owner only."""
    conversation, reply = await database_sync_to_async(_long_reply)(alice, WORST_TEXT)
    socket = await _page_socket(alice, conversation.pk)
    frame = await socket.receive_from(timeout=10)
    assert size(frame) <= settings.CHAT_SOCKET_FRAME_BYTES
    loader = LOADER.search(frame)
    assert loader is not None and int(loader[1]) == reply.pk, frame[:300]
    assert 'hx-swap-oob="true"' in frame and "Loading a long message" in frame
    await socket.send_to(text_data=json.dumps({"action": "cancel"}))
    assert 'data-code="nothing_to_cancel"' in await socket.receive_from(timeout=10)
    await socket.disconnect()

    article = await database_sync_to_async(_get)(alice, loader[2])
    assert article.status_code == 200
    page = article.content.decode()
    assert page.startswith(f'<article id="msg-{reply.pk}"') and "hx-swap-oob" not in page
    assert escape(WORST_TEXT) in page  # the Copy button's Markdown: the reply whole
    assert (await database_sync_to_async(_get)(charlie, loader[2])).status_code == 404
    other = await database_sync_to_async(_long_reply)(charlie, "charlie's")
    wrong_conversation = loader[2].replace(str(reply.pk), str(other[1].pk))
    assert (await database_sync_to_async(_get)(alice, wrong_conversation)).status_code == 404


async def test_finding_5_switching_to_a_branch_over_1_mib_arrives_in_frames(
    alice: Any, settings: Any
) -> None:
    """The branch comes in frames within the limit: the first replaces the list, the rest
    append to it, and a message too long for any frame is a placeholder."""
    conversation, first, second, messages = await database_sync_to_async(_long_branch)(alice)
    socket = await _page_socket(alice, conversation.pk)
    await socket.receive_from(timeout=10)  # the settled state
    await socket.send_to(text_data=json.dumps({"action": "select", "message_id": second.pk}))
    frames = [await socket.receive_from(timeout=10)]
    while sum(f.count('<article id="msg-') for f in frames) < len(messages):
        frames.append(await socket.receive_from(timeout=10))
    await socket.disconnect()
    assert len(frames) > 1
    assert max(map(size, frames)) <= settings.CHAT_SOCKET_FRAME_BYTES
    assert frames[0].startswith('<div id="messages" hx-swap-oob="innerHTML">')
    assert all(f.startswith('<div hx-swap-oob="beforeend:#messages">') for f in frames[1:])
    shown = re.findall(r'<article id="msg-(\d+)"', "".join(frames))
    assert shown == [str(m.pk) for m in messages]
    loaders = [int(found[0]) for found in LOADER.findall("".join(frames))]
    assert loaders == [messages[-1].pk]  # only the one over the limit by itself
    assert first.pk not in map(int, shown)


async def test_finding_5_a_json_client_is_told_to_read_a_long_branch_over_the_api(
    alice: Any,
) -> None:
    conversation, _first, second, _messages = await database_sync_to_async(_long_branch)(alice)
    session_key = await database_sync_to_async(signed_in_session)(alice)
    socket = conversation_communicator(
        alice, conversation.pk, session_key=session_key, application=_as_daphne()
    )
    assert (await socket.connect(timeout=10))[0]
    await socket.send_to(text_data=json.dumps({"action": "select", "message_id": second.pk}))
    event = json.loads(await socket.receive_from(timeout=10))
    assert event == {"type": "conversation.branch", "messages": None}
    await socket.disconnect()


@pytest.mark.processes
@NEEDS_SHARED_SERVICES
async def test_finding_5_a_live_server_opens_a_conversation_whose_last_reply_is_over_1_mib(
    alice: Any, tmp_path: Path
) -> None:
    """On daphne itself, with its 1 MiB limit, the socket answers rather than closing 1011."""
    conversation, reply = await database_sync_to_async(_long_reply)(alice, WORST_TEXT)
    cookie = await database_sync_to_async(session_cookie)(alice)
    with servers(1, tmp_path) as (server,):
        async with open_page_socket(server, conversation.pk, cookie) as socket:
            frame = await socket.recv()
            assert isinstance(frame, str) and size(frame) < DAPHNE_MAX_MESSAGE_BYTES
            assert f'<article id="msg-{reply.pk}"' in frame
            await socket.send(json.dumps({"action": "cancel"}))
            assert 'data-code="nothing_to_cancel"' in await socket.recv()


def _long_reply(owner: Any, text: str) -> tuple[Conversation, Message]:
    conversation = Conversation.objects.create(owner=owner)
    question = Message.objects.create(conversation=conversation, role="user", content="Go on")
    reply = Message.objects.create(
        conversation=conversation, role="assistant", content=text, parent=question
    )
    Conversation.objects.filter(pk=conversation.pk).update(current_leaf=reply)
    return conversation, reply


def _long_branch(owner: Any) -> tuple[Conversation, Message, Message, list[Message]]:
    """A turn with two versions; the second goes on with three long replies (under the limit,
    under it, over it by itself). Shown: the first version."""
    conversation = Conversation.objects.create(owner=owner)
    question = Message.objects.create(conversation=conversation, role="user", content="Hi")
    first = Message.objects.create(
        conversation=conversation, role="assistant", content="short", parent=question
    )
    second = Message.objects.create(
        conversation=conversation, role="assistant", content="another", parent=question
    )
    messages = [question, second]
    for length in (150_000, 150_000, 400_000):
        asked = Message.objects.create(
            conversation=conversation, role="user", content="More", parent=messages[-1]
        )
        answer = Message.objects.create(
            conversation=conversation,
            role="assistant",
            content="word " * (length // 5),
            parent=asked,
        )
        messages += [asked, answer]
    Conversation.objects.filter(pk=conversation.pk).update(current_leaf=first)
    return conversation, first, second, messages


async def _page_socket(user: Any, conversation_id: Any) -> WebsocketCommunicator:
    session_key = await database_sync_to_async(signed_in_session)(user)
    socket = conversation_communicator(
        user,
        conversation_id,
        session_key=session_key,
        json_protocol=False,
        application=_as_daphne(),
    )
    connected, _ = await socket.connect(timeout=10)
    assert connected
    return socket


def _as_daphne() -> Any:
    return refusing_frames_as_daphne_does(URLRouter(websocket_urlpatterns))


def _get(user: Any, url: str) -> Any:
    client = Client()
    client.force_login(user)
    return client.get(url)


def _writing_text(frame: str) -> str:
    """The text a frame puts in the block being written (#msg-7-writing)."""
    found = re.search(r'id="msg-7-writing"[^>]*>(.*?)</(?:div|span)>', frame, re.S)
    assert found is not None, frame[:200]
    return html.unescape(found[1])

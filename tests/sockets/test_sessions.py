"""A socket lives no longer than its session: logout, a new password, deactivation, a deleted or
expired session close it (code 4401), and a frame on a dead session starts nothing."""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.sessions.models import Session
from django.test import Client
from django.utils import timezone

from conversations.models import Conversation, Message
from conversations.sockets.consumer import CLOSE_SESSION_ENDED
from conversations.sockets.renderers import JSON_SUBPROTOCOL
from tests.support.db import close_worker_connections
from tests.support.sockets import Socket, finished, signed_in_session

pytestmark = [pytest.mark.django_db(transaction=True)]

ORIGIN = b"http://127.0.0.1"


@pytest.fixture
def application(db: Any) -> Any:
    return importlib.import_module("chatsite.asgi").application  # settles dead replies: sync


@pytest.fixture
async def open_socket(application: Any) -> AsyncIterator[Callable[..., Any]]:
    """A socket through the whole ASGI stack (cookies, session, origin), as a browser opens it."""
    opened: list[WebsocketCommunicator] = []

    async def _open(session_key: str, conversation: Conversation) -> Socket:
        cookie = f"{settings.SESSION_COOKIE_NAME}={session_key}".encode()
        communicator = WebsocketCommunicator(
            application,
            f"/ws/conversations/{conversation.pk}/",
            headers=[(b"cookie", cookie), (b"host", b"127.0.0.1"), (b"origin", ORIGIN)],
            subprotocols=[JSON_SUBPROTOCOL],
        )
        connected, _ = await communicator.connect(timeout=10)
        assert connected
        opened.append(communicator)
        return Socket(communicator)

    yield _open
    for communicator in opened:
        await communicator.disconnect()
    await close_worker_connections()


async def closed_with(socket: Socket, timeout: float = 2) -> int | None:
    """The close code the socket gets within `timeout` (the bound the issue sets is a second)."""
    output = await socket.communicator.receive_output(timeout=timeout)
    assert output["type"] == "websocket.close", output
    return int(output["code"])


def client_with(session_key: str) -> Client:
    client = Client()
    client.cookies[settings.SESSION_COOKIE_NAME] = session_key
    return client


async def test_logging_out_closes_that_sessions_sockets_and_no_others(
    open_socket: Any, alice: Any, users: dict[str, Any], conversation: Conversation
) -> None:
    mine = await database_sync_to_async(signed_in_session)(alice)
    elsewhere = await database_sync_to_async(signed_in_session)(alice)  # alice on her phone
    socket = await open_socket(mine, conversation)
    phone = await open_socket(elsewhere, conversation)

    response = await database_sync_to_async(client_with(mine).post)("/accounts/logout/")
    assert response.status_code == 302
    assert await closed_with(socket) == CLOSE_SESSION_ENDED
    assert await phone.nothing_within(0.3), "her other session is still signed in"


@pytest.mark.parametrize("change", ["password", "deactivated", "session deleted"])
async def test_a_changed_account_closes_its_open_sockets(
    open_socket: Any, alice: Any, conversation: Conversation, change: str
) -> None:
    key = await database_sync_to_async(signed_in_session)(alice)
    socket = await open_socket(key, conversation)

    def change_it() -> None:
        if change == "password":
            alice.set_password("a-new-password-for-alice")
            alice.save()
        elif change == "deactivated":
            alice.is_active = False
            alice.save()
        else:
            Session.objects.get(pk=key).delete()

    await database_sync_to_async(change_it)()
    assert await closed_with(socket) == CLOSE_SESSION_ENDED


async def test_a_frame_on_a_session_that_ended_unannounced_starts_nothing(
    open_socket: Any, alice: Any, conversation: Conversation
) -> None:
    key = await database_sync_to_async(signed_in_session)(alice)
    socket = await open_socket(key, conversation)
    # Expired behind the socket's back: no signal, only the check before acting on the frame.
    await database_sync_to_async(Session.objects.filter(pk=key).update)(
        expire_date=timezone.now() - timedelta(seconds=1)
    )
    await socket.send(action="send", content="still there?")
    assert await closed_with(socket) == CLOSE_SESSION_ENDED
    assert await database_sync_to_async(Message.objects.count)() == 0


async def test_a_socket_closes_when_its_session_expires(
    open_socket: Any, alice: Any, conversation: Conversation
) -> None:
    key = await database_sync_to_async(signed_in_session)(alice)
    await database_sync_to_async(Session.objects.filter(pk=key).update)(
        expire_date=timezone.now() + timedelta(seconds=1)
    )
    socket = await open_socket(key, conversation)
    assert await closed_with(socket, timeout=5) == CLOSE_SESSION_ENDED


async def test_a_user_saved_for_a_login_keeps_the_sockets_open(
    open_socket: Any, alice: Any, conversation: Conversation
) -> None:
    key = await database_sync_to_async(signed_in_session)(alice)
    socket = await open_socket(key, conversation)
    await database_sync_to_async(signed_in_session)(alice)  # a login elsewhere stamps last_login
    await socket.send(action="send", content="hello")
    assert (await socket.receive())["type"] == "message.started"
    await socket.receive_until(finished)  # the reply ends before the test does

"""A browser session may open CHAT_SOCKET_OPENS_PER_MINUTE sockets a minute; the rest are
refused at the handshake, before any database work."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings as django_settings

from chatsite.socket_opens import opener
from conversations.models import Conversation
from tests.support.db import close_worker_connections
from tests.support.sockets import signed_in_session

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture
def application(db: Any) -> Any:
    return importlib.import_module("chatsite.asgi").application  # settles dead replies: sync


async def open_with(application: Any, session_key: str, conversation: Conversation) -> bool:
    communicator = WebsocketCommunicator(
        application,
        f"/ws/conversations/{conversation.pk}/",
        headers=[
            (b"cookie", f"{django_settings.SESSION_COOKIE_NAME}={session_key}".encode()),
            (b"host", b"127.0.0.1"),
            (b"origin", b"http://127.0.0.1"),
        ],
    )
    connected, _ = await communicator.connect(timeout=10)
    await communicator.disconnect()
    return bool(connected)


async def test_opens_over_the_rate_are_refused_per_session(
    application: Any, alice: Any, conversation: Conversation, settings: Any
) -> None:
    settings.CHAT_SOCKET_OPENS_PER_MINUTE = 2
    first = await database_sync_to_async(signed_in_session)(alice)
    second = await database_sync_to_async(signed_in_session)(alice)
    try:
        assert [await open_with(application, first, conversation) for _ in range(3)] == [
            True,
            True,
            False,
        ]
        assert await open_with(application, second, conversation), "another session counts apart"
    finally:
        await close_worker_connections()


def test_the_opener_is_the_session_cookie_or_else_the_address() -> None:
    cookie = f"{django_settings.SESSION_COOKIE_NAME}=abc; other=1".encode()
    with_cookie = {"headers": [(b"cookie", cookie)], "client": ("10.0.0.7", 5000)}
    assert opener(with_cookie) == "session:abc"
    assert opener({"headers": [], "client": ("10.0.0.7", 5000)}) == "address:10.0.0.7"

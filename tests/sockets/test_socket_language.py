"""Issue 30, problem 8: what the socket says (its errors, the fragments it renders) is in the
page's language: the language cookie, else the browser's Accept-Language."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.conf import settings

from tests.support.db import close_worker_connections
from tests.support.sockets import Socket, conversation_communicator, signed_in_session

pytestmark = [pytest.mark.django_db(transaction=True)]

COOKIE = settings.LANGUAGE_COOKIE_NAME


@pytest.fixture(autouse=True)
async def close_db_connections() -> AsyncIterator[None]:
    yield
    await close_worker_connections()


async def test_problem_8_the_sockets_errors_are_in_the_pages_language(
    alice: Any, conversation: Any
) -> None:
    session_key = await database_sync_to_async(signed_in_session)(alice)
    communicator = conversation_communicator(
        alice, conversation.pk, session_key=session_key, json_protocol=False
    )
    communicator.scope["headers"] = [(b"accept-language", b"zh-CN,zh;q=0.9")]
    communicator.scope["cookies"] = {}
    connected, _code = await communicator.connect(timeout=10)
    assert connected
    try:
        socket = Socket(communicator)
        await communicator.receive_from()  # the saved state on connect
        await socket.send(action="send", content="   ", HEADERS={"HX-Request": "true"})
        fragment = await communicator.receive_from()
        assert 'data-code="empty"' in fragment
        assert "请先输入消息再发送。" in fragment
    finally:
        await communicator.disconnect()


async def test_problem_8_the_language_cookie_wins_on_the_socket(
    alice: Any, conversation: Any
) -> None:
    session_key = await database_sync_to_async(signed_in_session)(alice)
    communicator = conversation_communicator(alice, conversation.pk, session_key=session_key)
    communicator.scope["headers"] = [(b"accept-language", b"zh-CN")]
    communicator.scope["cookies"] = {COOKIE: "fr"}
    connected, _code = await communicator.connect(timeout=10)
    assert connected
    try:
        socket = Socket(communicator)
        await socket.send(action="cancel")
        event = await socket.receive()
        while event["type"] != "error":
            event = await socket.receive()
        assert event["message"] == "Rien n\u2019est en cours d\u2019écriture."
    finally:
        await communicator.disconnect()

"""The real ASGI stack: sessions authenticate sockets, and foreign origins are refused."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from chatsite.env import env_bool, env_float, env_int
from conversations.sockets.renderers import JSON_SUBPROTOCOL
from tests.support.servers import ROOT, session_cookie

pytestmark = [pytest.mark.django_db(transaction=True)]

# A browser sends both: the Host it opened the socket on, and the Origin of the page that did.
OUR_SITE = [(b"host", b"127.0.0.1"), (b"origin", b"http://127.0.0.1")]


@pytest.fixture
def application(db: Any) -> Any:
    return importlib.import_module("chatsite.asgi").application


def communicator(application: Any, conversation: Any, headers: list[tuple[bytes, bytes]]) -> Any:
    return WebsocketCommunicator(
        application,
        f"/ws/conversations/{conversation.pk}/",
        headers=headers,
        subprotocols=[JSON_SUBPROTOCOL],
    )


async def test_it_accepts_the_owner_s_session_from_our_own_origin(
    application: Any, alice: Any, conversation: Any
) -> None:
    cookie = await database_sync_to_async(session_cookie)(alice)
    socket = communicator(application, conversation, [(b"cookie", cookie.encode()), *OUR_SITE])
    connected, subprotocol = await socket.connect()
    assert connected and subprotocol == JSON_SUBPROTOCOL
    await socket.disconnect()


async def test_it_refuses_a_socket_opened_from_another_site(
    application: Any, alice: Any, conversation: Any
) -> None:
    cookie = await database_sync_to_async(session_cookie)(alice)
    socket = communicator(
        application,
        conversation,
        [(b"cookie", cookie.encode()), (b"origin", b"https://evil.example")],
    )
    connected, _ = await socket.connect()
    assert not connected


async def opens(application: Any, user: Any, conversation: Any, **headers: str) -> bool:
    """Whether alice's socket handshake with these headers (host=, origin=, ...) is accepted."""
    cookie = await database_sync_to_async(session_cookie)(user)
    sent = [(b"cookie", cookie.encode())]
    sent += [(name.replace("_", "-").encode(), value.encode()) for name, value in headers.items()]
    socket = communicator(application, conversation, sent)
    connected, _ = await socket.connect()
    await socket.disconnect()
    return bool(connected)


async def test_it_accepts_a_socket_from_its_own_scheme_host_and_port(
    application: Any, alice: Any, conversation: Any
) -> None:
    assert await opens(
        application, alice, conversation, host="127.0.0.1:8000", origin="http://127.0.0.1:8000"
    )


async def test_it_refuses_a_page_on_the_same_host_but_another_port(
    application: Any, alice: Any, conversation: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="chatsite.origins")
    assert not await opens(
        application, alice, conversation, host="127.0.0.1:8000", origin="http://127.0.0.1:9999"
    )
    assert "WebSocket refused: origin 'http://127.0.0.1:9999'" in caplog.text


async def test_it_refuses_an_https_origin_for_a_plain_socket(
    application: Any, alice: Any, conversation: Any
) -> None:
    assert not await opens(
        application, alice, conversation, host="127.0.0.1:8000", origin="https://127.0.0.1:8000"
    )


async def test_it_refuses_a_host_outside_allowed_hosts_even_from_its_own_origin(
    application: Any, alice: Any, conversation: Any
) -> None:
    # DNS rebinding: evil.example resolved to our address; its page's origin matches its Host.
    assert not await opens(
        application, alice, conversation, host="evil.example", origin="http://evil.example"
    )


async def test_it_refuses_a_socket_without_an_origin(
    application: Any, alice: Any, conversation: Any
) -> None:
    # Browsers always send one; other clients (the API's, the tests') send their server's origin.
    assert not await opens(application, alice, conversation, host="127.0.0.1:8000")
    assert not await opens(application, alice, conversation, host="127.0.0.1:8000", origin="null")


async def test_it_accepts_an_origin_listed_in_csrf_trusted_origins(
    application: Any, alice: Any, conversation: Any, settings: Any
) -> None:
    settings.CSRF_TRUSTED_ORIGINS = ["http://127.0.0.1:9999", "https://*.example.com"]
    host = "127.0.0.1:8000"
    assert await opens(application, alice, conversation, host=host, origin="http://127.0.0.1:9999")
    assert await opens(application, alice, conversation, host=host, origin="https://a.example.com")
    # Only the listed scheme and port.
    assert not await opens(
        application, alice, conversation, host=host, origin="http://127.0.0.1:9998"
    )
    assert not await opens(
        application, alice, conversation, host=host, origin="http://a.example.com"
    )


async def test_it_takes_the_scheme_from_the_proxy_header_when_configured(
    application: Any, alice: Any, conversation: Any, settings: Any
) -> None:
    settings.ALLOWED_HOSTS = ["chat.example.com"]
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    behind_tls = {"host": "chat.example.com", "x_forwarded_proto": "https"}
    assert await opens(
        application, alice, conversation, origin="https://chat.example.com", **behind_tls
    )
    assert not await opens(
        application, alice, conversation, origin="http://chat.example.com", **behind_tls
    )


async def test_it_closes_a_stranger_s_session_socket_with_4403(
    application: Any, charlie: Any, conversation: Any
) -> None:
    cookie = await database_sync_to_async(session_cookie)(charlie)
    socket = communicator(application, conversation, [(b"cookie", cookie.encode()), *OUR_SITE])
    await socket.connect()
    assert (await socket.receive_output(timeout=2))["code"] == 4403
    await socket.disconnect()  # ends the consumer, which would otherwise wait on the layer


def test_bad_environment_values_fail_with_a_message_naming_the_variable(monkeypatch: Any) -> None:
    monkeypatch.setenv("CHAT_COALESCE_MS", "fast")
    with pytest.raises(ImproperlyConfigured, match="CHAT_COALESCE_MS must be a whole number"):
        env_int("CHAT_COALESCE_MS", 30)
    monkeypatch.setenv("CHAT_FLUSH_INTERVAL_S", "-1")
    with pytest.raises(ImproperlyConfigured, match=r"at least 0\.05"):
        env_float("CHAT_FLUSH_INTERVAL_S", 1.0, minimum=0.05)
    monkeypatch.setenv("DEBUG", "maybe")
    with pytest.raises(ImproperlyConfigured, match="DEBUG must be one of"):
        env_bool("DEBUG")


def test_the_secret_key_comes_from_the_environment() -> None:
    assert settings.SECRET_KEY == "tests-only-secret-key-not-for-production"
    assert not settings.DEBUG


def test_it_refuses_to_start_without_a_secret_key_when_debug_is_off() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "DEBUG")}
    result = subprocess.run(
        [sys.executable, "-c", "import chatsite.settings"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0
    assert "SECRET_KEY must be set when DEBUG is off" in result.stderr


async def test_a_socket_on_a_path_we_do_not_serve_is_closed_cleanly(
    application: Any, alice: Any, caplog: pytest.LogCaptureFixture
) -> None:
    cookie = await database_sync_to_async(session_cookie)(alice)
    socket = WebsocketCommunicator(
        application,
        "/ws/conversations/1/",
        headers=[(b"cookie", cookie.encode()), *OUR_SITE],
    )
    await socket.connect()
    closing = await socket.receive_output(timeout=2)
    assert (closing["type"], closing["code"]) == ("websocket.close", 4404)
    await socket.disconnect()
    assert "Traceback" not in caplog.text and "No route found" not in caplog.text

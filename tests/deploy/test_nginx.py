"""chatsite behind nginx as deploy/nginx/ configures it, in front of two real daphne processes:
replies stream through it token by token, on the socket and the gateway; Stop gets through; the
login throttle counts each client's own address, not the proxy's and not one a client names; and
a body over its route's limit stops at the proxy."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from axes.models import AccessAttempt
from channels.db import database_sync_to_async

from conversations.models import Message
from conversations.services.tokens import api_token_create
from tests.support.nginx import NEEDS_NGINX, Nginx, nginx
from tests.support.replies import full_reply, only_reply_of
from tests.support.servers import NEEDS_SHARED_SERVICES, open_socket, servers, session_cookie
from tests.support.sockets import Event, LiveSocket, finished, streamed_text

pytestmark = [
    pytest.mark.processes,
    pytest.mark.django_db(transaction=True),
    NEEDS_SHARED_SERVICES,
    NEEDS_NGINX,
]

TOKENS = 40
DELAY_MS = 40  # a reply takes TOKENS * DELAY_MS = 1.6 s
FAILURE_LIMIT = 3
MB = 1024 * 1024
# Two clients on addresses of their own: the whole of 127.0.0.0/8 is this machine's.
CLIENT_A, CLIENT_B = "127.0.0.2", "127.0.0.3"
# What a client claims to be, in an X-Forwarded-For of its own: never believed.
CLAIMED = "203.0.113.7"


@pytest.fixture
def proxy(tmp_path: Path) -> Iterator[Nginx]:
    env: dict[str, Any] = {
        "CHAT_TRUSTED_PROXY_COUNT": 1,
        "CHAT_SCRIPTED_TOKENS": TOKENS,
        "CHAT_SCRIPTED_DELAY_MS": DELAY_MS,
        "LOGIN_FAILURE_LIMIT": FAILURE_LIMIT,
        # Its own rate counters: test runs share the Redis database.
        "CACHE_KEY_PREFIX": f"nginx-test-{uuid.uuid4().hex}",
    }
    with (
        servers(2, tmp_path, **env) as app_servers,
        nginx([server.port for server in app_servers], tmp_path) as front,
    ):
        yield front


async def timed_until_finished(socket: LiveSocket) -> list[tuple[float, Event]]:
    """Every event up to message.finished, with when it arrived."""
    events: list[tuple[float, Event]] = []
    while not events or not finished(events[-1][1]):
        event = await socket.receive()
        events.append((time.monotonic(), event))
    return events


async def test_a_reply_streams_token_by_token_through_the_proxy(
    proxy: Nginx, alice: Any, conversation: Any
) -> None:
    cookie = await database_sync_to_async(session_cookie)(alice)
    async with open_socket(proxy, conversation.pk, cookie) as connection:  # type: ignore[arg-type]
        socket = LiveSocket(connection)
        await socket.send(action="send", content="hi")
        timed = await timed_until_finished(socket)

    types = [event["type"] for _, event in timed]
    assert types[0] == "message.started" and types[-1] == "message.finished"
    deltas = [(at, event) for at, event in timed if event["type"] == "message.delta"]
    assert len(deltas) >= 5, "the reply came in a few pieces, not token by token"
    # Unbuffered: the first words arrive while the engine is still writing the rest.
    assert timed[-1][0] - deltas[0][0] > TOKENS * DELAY_MS / 1000 / 2
    assert streamed_text([event for _, event in timed]) == full_reply(TOKENS)
    assert timed[-1][1]["message"]["status"] == "complete"


async def test_stop_reaches_the_reply_through_the_proxy(
    proxy: Nginx, alice: Any, conversation: Any
) -> None:
    cookie = await database_sync_to_async(session_cookie)(alice)
    async with open_socket(proxy, conversation.pk, cookie) as connection:  # type: ignore[arg-type]
        socket = LiveSocket(connection)
        await socket.send(action="send", content="hi")
        await socket.receive_until(lambda event: event["type"] == "message.delta")
        await socket.send(action="cancel")
        events = await socket.receive_until(finished)

    assert events[-1]["message"]["status"] == "cancelled"
    row = await only_reply_of(conversation)
    assert row.status == Message.Status.CANCELLED
    assert row.completion_tokens < TOKENS


def test_a_gateway_stream_is_not_buffered_by_the_proxy(proxy: Nginx, alice: Any) -> None:
    _, key = api_token_create(user=alice, name="through nginx")
    body = {"model": "default", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    headers = {"Authorization": f"Bearer {key}"}
    arrivals: list[float] = []
    with (
        httpx.Client(base_url=proxy.origin, timeout=20) as client,
        client.stream("POST", "/v1/chat/completions", json=body, headers=headers) as response,
    ):
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                arrivals.append(time.monotonic())

    assert len(arrivals) >= 5
    assert arrivals[-1] - arrivals[0] > TOKENS * DELAY_MS / 1000 / 2


def client_on(address: str, proxy: Nginx) -> httpx.Client:
    """A client whose connections come from `address`."""
    transport = httpx.HTTPTransport(local_address=address)
    return httpx.Client(base_url=proxy.origin, transport=transport, timeout=20)


def failed_logins(client: httpx.Client, count: int) -> list[int]:
    """The statuses of `count` logins with wrong passwords, each for another username (so that
    only the address can add up to a lockout), each claiming another address."""
    client.get("/accounts/login/").raise_for_status()
    statuses = []
    for _ in range(count):
        response = client.post(
            "/accounts/login/",
            data={"username": f"nobody-{uuid.uuid4().hex[:8]}", "password": "wrong"},
            headers={"X-CSRFToken": client.cookies["csrftoken"], "X-Forwarded-For": CLAIMED},
        )
        statuses.append(response.status_code)
    return statuses


def test_the_login_throttle_counts_each_clients_own_address(proxy: Nginx) -> None:
    with client_on(CLIENT_A, proxy) as a, client_on(CLIENT_B, proxy) as b:
        from_a = failed_logins(a, FAILURE_LIMIT + 1)
        from_b = failed_logins(b, 1)

    assert from_a[0] == 200 and from_a[-1] == 429, "a's address is locked out"
    assert from_b == [200], "b's address is counted apart: the proxy's is not theirs"
    addresses = set(AccessAttempt.objects.values_list("ip_address", flat=True))
    assert addresses == {CLIENT_A, CLIENT_B}, "the address nginx saw, not the one claimed"


def test_a_body_over_the_limit_is_refused_at_the_proxy_and_an_import_may_be_larger(
    proxy: Nginx,
) -> None:
    body = b"x" * (3 * MB)  # over 2.5 MB, far under an import's 512 MB
    headers = {"Content-Type": "application/octet-stream"}
    with httpx.Client(base_url=proxy.origin, timeout=20) as client:
        refused = client.post("/accounts/login/", content=body, headers=headers)
        to_import = client.post("/api/imports/", content=body, headers=headers)

    assert refused.status_code == 413
    assert re.search(r"<center>nginx[^<]*</center>", refused.text), "nginx's page, not the app's"
    # Through to the app, which asks who is sending it.
    assert to_import.status_code == 401
    assert to_import.headers["Content-Type"].startswith("application/json")

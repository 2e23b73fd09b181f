"""Several real server processes sharing Redis and PostgreSQL: cancel, join, crash. Each test runs
under daphne and under uvicorn, the two ASGI servers docs/deploy.md documents."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from channels.db import database_sync_to_async

from conversations.models import Message
from tests.support.launch import ASGI_SERVERS
from tests.support.replies import full_reply, only_reply_of, wait_until_settled
from tests.support.servers import (
    NEEDS_SHARED_SERVICES,
    ROOT,
    free_port,
    open_socket,
    server_env,
    servers,
    session_cookie,
)
from tests.support.sockets import LiveSocket, finished, streamed_text

pytestmark = [
    pytest.mark.processes,
    pytest.mark.django_db(transaction=True),
    NEEDS_SHARED_SERVICES,
]


@pytest.fixture(params=ASGI_SERVERS)
def asgi_server(request: pytest.FixtureRequest) -> str:
    server: str = request.param
    return server


async def test_a_cancel_through_one_process_stops_a_reply_running_in_another(
    alice: Any, conversation: Any, tmp_path: Path, asgi_server: str
) -> None:
    cookie = await database_sync_to_async(session_cookie)(alice)
    with servers(2, tmp_path, server=asgi_server, CHAT_SCRIPTED_TOKENS=2000) as (a, b):
        async with (
            open_socket(a, conversation.pk, cookie) as ws_a,
            open_socket(b, conversation.pk, cookie) as ws_b,
        ):
            tab_a, tab_b = LiveSocket(ws_a), LiveSocket(ws_b)
            await tab_a.send(action="send", content="count", idempotency_key="k1")
            events_a = await tab_a.receive_until(lambda e: e["type"] == "message.delta")
            await tab_b.receive_until(lambda e: e["type"] == "message.delta")
            await tab_b.send(action="cancel")
            events_a += await tab_a.receive_until(finished)
            events_b = await tab_b.receive_until(finished)

    assert events_a[-1]["message"]["status"] == "cancelled"
    assert events_b[-1]["message"]["status"] == "cancelled"
    row = await only_reply_of(conversation)
    assert row.status == Message.Status.CANCELLED
    assert 0 < row.completion_tokens < 2000, "the engine stopped long before the end"
    # What the tabs were sent, none of what the engine wrote after the Stop (issue 23, finding
    # 16): whole tokens, fewer than the engine counted where it wrote on.
    assert row.content == streamed_text(events_a)
    assert full_reply(row.completion_tokens).startswith(row.content)
    assert row.cancelled_by == "alice" and row.cancel_latency_ms is not None


async def test_a_tab_joining_another_process_mid_reply_sees_it_exactly_once(
    alice: Any, conversation: Any, tmp_path: Path, asgi_server: str
) -> None:
    cookie = await database_sync_to_async(session_cookie)(alice)
    with servers(2, tmp_path, server=asgi_server, CHAT_SCRIPTED_TOKENS=150) as (a, b):
        async with open_socket(a, conversation.pk, cookie) as ws_a:
            tab_a = LiveSocket(ws_a)
            await tab_a.send(action="send", content="go")
            await tab_a.receive_until(lambda e: e["type"] == "message.delta" and e["offset"] > 200)
            async with open_socket(b, conversation.pk, cookie) as ws_b:
                late = await LiveSocket(ws_b).receive_until(finished)
            await tab_a.receive_until(finished)

    assert late[0]["type"] == "message.snapshot" and len(late[0]["text"]) > 200
    assert streamed_text(late) == full_reply(150)
    row = await only_reply_of(conversation)
    assert row.status == Message.Status.COMPLETE and row.content == full_reply(150)


async def test_tabs_on_two_processes_agree_on_versions_and_branches(
    alice: Any, conversation: Any, tmp_path: Path, asgi_server: str
) -> None:
    cookie = await database_sync_to_async(session_cookie)(alice)
    with servers(2, tmp_path, server=asgi_server, CHAT_SCRIPTED_TOKENS=5) as (a, b):
        async with (
            open_socket(a, conversation.pk, cookie) as ws_a,
            open_socket(b, conversation.pk, cookie) as ws_b,
        ):
            tab_a, tab_b = LiveSocket(ws_a), LiveSocket(ws_b)
            await tab_a.send(action="send", content="Hello")
            first = (await tab_a.receive_until(finished))[-1]["message"]
            await tab_b.receive_until(finished)

            # A regenerate through process b: the tab on a sees the new version start after
            # the same question, and end.
            await tab_b.send(action="regenerate")
            seen_by_a = await tab_a.receive_until(finished)
            await tab_b.receive_until(finished)
            assert seen_by_a[0]["type"] == "message.started"
            assert seen_by_a[0]["after"] == first["parent"]
            second = seen_by_a[-1]["message"]
            assert second["version"] == [2, 2, first["id"], None]

            # A version chosen through process a: both tabs show the same branch.
            await tab_a.send(action="select", message_id=first["id"])
            for tab in (tab_a, tab_b):
                events = await tab.receive_until(lambda e: e["type"] == "conversation.branch")
                assert [m["id"] for m in events[-1]["messages"]] == [first["parent"], first["id"]]

    await database_sync_to_async(conversation.refresh_from_db)()
    assert conversation.current_leaf_id == first["id"]


async def test_a_killed_process_leaves_its_flushed_text_and_an_interrupted_reply(
    alice: Any, conversation: Any, tmp_path: Path, asgi_server: str
) -> None:
    cookie = await database_sync_to_async(session_cookie)(alice)
    overrides = {
        "CHAT_SCRIPTED_TOKENS": 2000,
        "CHAT_HEARTBEAT_TIMEOUT_S": 1,
        "CHAT_FLUSH_INTERVAL_S": 0.2,
    }
    with servers(1, tmp_path, server=asgi_server, **overrides) as (a,):
        async with open_socket(a, conversation.pk, cookie) as ws:
            tab = LiveSocket(ws)
            await tab.send(action="send", content="go")
            events = await tab.receive_until(
                lambda e: e["type"] == "message.delta" and e["offset"] > 300
            )
            seen = streamed_text([e for e in events if e["type"] == "message.delta"])
            await asyncio.sleep(0.5)  # at least one flush after what we saw
            a.kill()

    row = await only_reply_of(conversation)
    assert row.status == Message.Status.STREAMING, "nothing settled it yet: the process is gone"
    assert row.content.startswith(seen), "what the user saw was flushed before the kill"
    assert row.content == full_reply(len(row.content.split()))

    await asyncio.sleep(1.2)  # the heartbeat goes stale
    command = await asyncio.create_subprocess_exec(
        sys.executable, "manage.py", "mark_interrupted",
        cwd=ROOT, env=server_env(**overrides), stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    stdout, _ = await command.communicate()
    assert command.returncode == 0
    assert "1 reply(s) marked interrupted" in stdout.decode()
    row = await only_reply_of(conversation)
    assert row.status == Message.Status.INTERRUPTED
    assert row.content.startswith(seen)

    # The conversation is usable again, through a fresh process.
    with servers(1, tmp_path, server=asgi_server, **overrides) as (b,):
        async with open_socket(b, conversation.pk, cookie) as ws:
            tab = LiveSocket(ws)
            await tab.send(action="send", content="again")
            events = await tab.receive_until(finished, timeout=60)
    assert events[-1]["message"]["status"] == "complete"


async def test_a_restarted_process_marks_replies_of_a_dead_one_interrupted(
    alice: Any, conversation: Any, tmp_path: Path, asgi_server: str
) -> None:
    cookie = await database_sync_to_async(session_cookie)(alice)
    overrides = {"CHAT_SCRIPTED_TOKENS": 2000, "CHAT_HEARTBEAT_TIMEOUT_S": 1}
    with servers(1, tmp_path, server=asgi_server, **overrides) as (a,):
        async with open_socket(a, conversation.pk, cookie) as ws:
            tab = LiveSocket(ws)
            await tab.send(action="send", content="go")
            await tab.receive_until(lambda e: e["type"] == "message.delta")
            a.kill()
    await asyncio.sleep(1.2)
    started = time.monotonic()
    with servers(1, tmp_path, server=asgi_server, **overrides):
        row = await only_reply_of(conversation)
    assert row.status == Message.Status.INTERRUPTED, (
        f"settled at start-up ({time.monotonic() - started:.1f}s)"
    )


async def test_a_redis_restart_mid_reply_loses_nothing(
    alice: Any, conversation: Any, tmp_path: Path, asgi_server: str
) -> None:
    port = free_port()
    redis_command = [
        "redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
    ]  # fmt: skip
    redis = await asyncio.create_subprocess_exec(*redis_command, stdout=asyncio.subprocess.DEVNULL)
    cookie = await database_sync_to_async(session_cookie)(alice)
    overrides = {"REDIS_URL": f"redis://127.0.0.1:{port}/0", "CHAT_SCRIPTED_TOKENS": 150}
    try:
        await asyncio.sleep(0.3)
        with servers(1, tmp_path, server=asgi_server, **overrides) as (server,):
            async with open_socket(server, conversation.pk, cookie) as ws:
                tab = LiveSocket(ws)
                await tab.send(action="send", content="go")
                await tab.receive_until(lambda e: e["type"] == "message.delta")
                redis.kill()
                await redis.wait()
                await asyncio.sleep(0.5)
                redis = await asyncio.create_subprocess_exec(
                    *redis_command, stdout=asyncio.subprocess.DEVNULL
                )
                await asyncio.sleep(0.3)
            row = await wait_until_settled(conversation)
            assert server.process.poll() is None, "the server survived the outage"
            assert row.status == Message.Status.COMPLETE
            assert row.content == full_reply(150), "the whole reply was saved"

            # A reconnecting tab works again: it can send and watch a reply stream.
            async with open_socket(server, conversation.pk, cookie) as ws:
                tab = LiveSocket(ws)
                await tab.send(action="send", content="after the outage")
                events = await tab.receive_until(finished, timeout=30)
            assert events[-1]["message"]["status"] == "complete"
            assert streamed_text(events) == full_reply(150)
    finally:
        redis.kill()
        await redis.wait()


async def test_logging_out_through_one_process_closes_the_sessions_socket_in_another(
    alice: Any, conversation: Any, tmp_path: Path, asgi_server: str
) -> None:
    import httpx
    from websockets.exceptions import ConnectionClosed

    cookie = await database_sync_to_async(session_cookie)(alice)
    name, key = cookie.split("=", 1)
    with servers(2, tmp_path, server=asgi_server) as (a, b):
        async with open_socket(a, conversation.pk, cookie) as ws_a:
            async with httpx.AsyncClient(base_url=b.origin, cookies={name: key}) as http:
                await http.get(f"/conversations/{conversation.pk}/")  # sets the CSRF cookie
                token = http.cookies["csrftoken"]
                response = await http.post(
                    "/accounts/logout/",
                    headers={"X-CSRFToken": token, "Origin": b.origin, "Referer": b.origin + "/"},
                )
                assert response.status_code == 302, response.text[:300]
            with pytest.raises(ConnectionClosed) as closed:
                await asyncio.wait_for(ws_a.recv(), 2)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4401

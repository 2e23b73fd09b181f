"""A server shut down gracefully (SIGTERM) saves every reply it is writing before it exits
(issue 30, problem 3: after a graceful restart a reply had lost the 66 characters written since
its last flush). Real server processes on PostgreSQL and Redis, under daphne and uvicorn."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from channels.db import database_sync_to_async

from conversations.generation.recovery import INTERRUPTED_ERROR
from conversations.models import Message
from tests.support.launch import ASGI_SERVERS, ROOT, stop_servers, wait_until_serving
from tests.support.replies import only_reply_of
from tests.support.servers import (
    NEEDS_SHARED_SERVICES,
    accepts_connections,
    free_port,
    open_socket,
    open_socket_on,
    server_env,
    servers,
    session_cookie,
)
from tests.support.sockets import LiveSocket, is_delta, streamed_text

pytestmark = [
    pytest.mark.processes,
    pytest.mark.django_db(transaction=True),
    NEEDS_SHARED_SERVICES,
]


@pytest.mark.parametrize("asgi_server", ASGI_SERVERS)
async def test_problem_3_a_graceful_shutdown_saves_every_running_reply_s_text(
    alice: Any, conversation: Any, tmp_path: Path, asgi_server: str
) -> None:
    cookie = await database_sync_to_async(session_cookie)(alice)
    # No flush during the test: whatever the row holds at the end, the shutdown wrote.
    overrides = {
        "CHAT_SCRIPTED_TOKENS": 5000,
        "CHAT_FLUSH_INTERVAL_S": 60,
        "CHAT_HEARTBEAT_TIMEOUT_S": 180,
    }
    with servers(1, tmp_path, server=asgi_server, **overrides) as (server,):
        async with open_socket(server, conversation.pk, cookie) as ws:
            tab = LiveSocket(ws)
            await tab.send(action="send", content="go")
            events = await tab.receive_until(lambda e: is_delta(e) and e["offset"] > 300)
            seen = streamed_text([e for e in events if is_delta(e)])
            server.process.send_signal(signal.SIGTERM)
            exit_code = await asyncio.to_thread(server.process.wait, 20)
    assert exit_code in (0, -signal.SIGTERM), server.log.read_text()[-2000:]

    row = await only_reply_of(conversation)
    assert row.status == Message.Status.INTERRUPTED, server.log.read_text()[-2000:]
    assert row.error == INTERRUPTED_ERROR
    assert row.heartbeat_at is None
    assert len(row.content) >= len(seen) and row.content.startswith(seen)


async def test_problem_3_make_run_s_server_saves_its_replies_when_it_stops_or_reloads(
    alice: Any, conversation: Any, tmp_path: Path
) -> None:
    """`make run` serves with `manage.py runserver` (daphne's, with the autoreloader), whose
    server runs on a thread of its own: Ctrl-C, like a reload after a code change, ends the
    process from the main thread."""
    cookie = await database_sync_to_async(session_cookie)(alice)
    port = free_port()
    env = server_env(
        CHAT_SCRIPTED_TOKENS=5000, CHAT_FLUSH_INTERVAL_S=60, CHAT_HEARTBEAT_TIMEOUT_S=180
    )
    log = tmp_path / "runserver.log"
    with log.open("wb") as output:
        runserver = subprocess.Popen(  # noqa: ASYNC220 - returns at once; waited for off the loop
            [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}"],
            cwd=ROOT,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, as a terminal's Ctrl-C reaches
        )
    try:
        await asyncio.to_thread(
            wait_until_serving, runserver, accepts_connections(port), name="runserver",
            log=log.read_text,
        )  # fmt: skip
        async with open_socket_on(port, conversation.pk, cookie) as ws:
            tab = LiveSocket(ws)
            await tab.send(action="send", content="go")
            events = await tab.receive_until(lambda e: is_delta(e) and e["offset"] > 300)
            seen = streamed_text([e for e in events if is_delta(e)])
            os.killpg(runserver.pid, signal.SIGINT)  # Ctrl-C
            await asyncio.to_thread(runserver.wait, 20)
    finally:
        stop_servers([runserver], grace=5)

    row = await only_reply_of(conversation)
    assert row.status == Message.Status.INTERRUPTED, log.read_text()[-2000:]
    assert len(row.content) >= len(seen) and row.content.startswith(seen)

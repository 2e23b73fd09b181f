"""Servers in other processes: a free port, readiness checks, and real daphne (or uvicorn)
processes, started by tests/support/launch.py, for tests that need several processes, crashes
or a live server."""

from __future__ import annotations

import http.server
import json
import os
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.test import Client
from websockets.asyncio.client import connect

from conversations.sockets.renderers import JSON_SUBPROTOCOL
from tests.support.launch import CHATSITE_APP, start_server, stop_servers, wait_until_serving

# The repository's root, named here too for the tests that import it with the servers.
from tests.support.launch import ROOT as ROOT

# Daphne processes read the test's database and share its Redis: in-memory SQLite will not do.
NEEDS_SHARED_SERVICES = pytest.mark.skipif(
    not settings.REDIS_URL or "postgresql" not in settings.DATABASES["default"]["ENGINE"],
    reason="needs REDIS_URL and a PostgreSQL DATABASE_URL (several processes share them)",
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def accepts_connections(port: int) -> Callable[[], bool]:
    """Ready when something listens on the loopback port."""

    def ready() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        except OSError:
            return False
        return True

    return ready


def answers(url: str) -> Callable[[], bool]:
    """Ready when a GET of the URL answers 200."""

    def ready() -> bool:
        try:
            return httpx.get(url, timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    return ready


def database_url() -> str:
    """The URL of the database this test run uses (pytest-django's test database)."""
    db = settings.DATABASES["default"]
    user = db.get("USER") or "postgres"
    return (
        f"postgres://{user}@{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"
    )


class ServerProcess:
    def __init__(
        self,
        port: int,
        env: dict[str, str],
        log: Path,
        server: str = "daphne",
        *,
        app: str = CHATSITE_APP,
    ):
        self.port = port
        self.log = log
        self.server = server
        self.process = start_server(listen=port, env=env, log=log, server=server, app=app)

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait_ready(self, timeout: float = 30) -> None:
        wait_until_serving(
            self.process,
            accepts_connections(self.port),
            name=self.server,
            log=self.log.read_text,
            timeout=timeout,
        )

    def rss(self) -> int:
        """The process's resident memory in bytes: VmRSS in /proc/<pid>/status."""
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        (kib,) = [line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:")]
        return int(kib) * 1024

    def kill(self) -> None:
        """kill -9: no cleanup, like a crashed or OOM-killed process."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        stop_servers([self.process], grace=5)


def server_env(**overrides: Any) -> dict[str, str]:
    env = {
        **os.environ,
        "DEBUG": "0",
        "SECURE_COOKIES": "0",  # plain HTTP on loopback
        "SECRET_KEY": "tests-only-secret-key-not-for-production",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "DATABASE_URL": database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "CHAT_ENGINE": "scripted",
        "CHAT_SCRIPTED_TOKENS": "200",
        "CHAT_SCRIPTED_DELAY_MS": "20",
        "CHAT_FLUSH_INTERVAL_S": "0.2",
        "LOG_LEVEL": "INFO",
    }
    env.update({key: str(value) for key, value in overrides.items()})
    return env


@contextmanager
def servers(
    count: int,
    tmp_path: Path,
    *,
    server: str = "daphne",
    app: str = CHATSITE_APP,
    **overrides: Any,
) -> Iterator[list[ServerProcess]]:
    """`count` processes of `server` serving `app` with server_env(**overrides), each on a port
    of its own, once all of them accept connections."""
    env = server_env(**overrides)
    started = [
        ServerProcess(free_port(), env, tmp_path / f"{server}-{i}.log", server, app=app)
        for i in range(count)
    ]
    try:
        for process in started:
            process.wait_ready()
        yield started
    finally:
        for process in started:
            process.stop()


def session_cookie(user: Any) -> str:
    client = Client()
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"


def open_socket(server: ServerProcess, conversation_id: Any, cookie: str) -> Any:
    return open_socket_on(server.port, conversation_id, cookie)


def open_socket_on(port: int, conversation_id: Any, cookie: str) -> Any:
    """A JSON socket on a conversation, to a server on `port` started some other way."""
    return connect(
        f"ws://127.0.0.1:{port}/ws/conversations/{conversation_id}/",
        subprotocols=[JSON_SUBPROTOCOL],  # type: ignore[list-item]
        additional_headers={"Cookie": cookie, "Origin": f"http://127.0.0.1:{port}"},
        open_timeout=10,
    )


@contextmanager
def models_server(asked: list[str] | None = None) -> Iterator[str]:
    """A server answering GET /v1/models as an OpenAI-compatible server does (its base URL);
    the paths it was asked for are appended to `asked`."""

    class Models(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if asked is not None:
                asked.append(self.path)
            body = json.dumps({"object": "list", "data": [{"id": "up-1"}]}).encode()
            self.send_response(200 if self.path == "/v1/models" else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Models)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/v1"
    finally:
        server.shutdown()
        server.server_close()

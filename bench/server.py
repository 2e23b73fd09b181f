"""Starting and stopping chatsite for a measurement, and reading what the servers report."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import psutil

from tests.support.launch import start_server, stop_servers

ROOT = Path(__file__).resolve().parent.parent
USERNAME = "bench"
# One per bench run: sessions made at the first start must stay valid on every later start.
SECRET_KEY = secrets.token_hex(32)


# chatsite unchanged, plus the scripted engine's records (bench/asgi.py).
APP = "bench.asgi:application"


@dataclass(frozen=True)
class Setup:
    """How chatsite is deployed for a measurement."""

    name: str
    processes: int
    database_url: str  # empty: a fresh SQLite file in the run's folder
    redis_url: str  # empty: the in-memory channel layer (one process only)
    settings: str = "chatsite.settings"
    server: str = "daphne"  # or "uvicorn" (with uvloop, httptools and websockets)

    def describe(self) -> str:
        layer = "Redis channel layer" if self.redis_url else "in-memory channel layer"
        if self.settings != "chatsite.settings":
            layer = "Redis pub/sub channel layer"
        db = "PostgreSQL" if self.database_url.startswith("postgres") else "SQLite"
        return f"{self.processes} {self.server} process(es), {layer}, {db}"


def services_missing(database_url: str, redis_url: str) -> str:
    """Why a PostgreSQL + Redis setup cannot run here, or "" if it can."""
    try:
        import redis

        redis.Redis.from_url(redis_url, socket_connect_timeout=2).ping()
    except Exception as exc:
        return f"Redis at {redis_url} is not reachable ({exc.__class__.__name__})"
    try:
        import psycopg

        ensure_database(database_url)
        psycopg.connect(database_url, connect_timeout=3).close()
    except Exception as exc:
        return f"PostgreSQL at {database_url} is not reachable ({exc.__class__.__name__})"
    return ""


def django_on(database_url: str) -> None:
    """Set Django up in this process on `database_url` (a PostgreSQL database is created if
    missing), migrated: for the benches that measure chatsite's code in-process."""
    import django
    from django.core.management import call_command

    if database_url.startswith(("postgres://", "postgresql://")):
        ensure_database(database_url)
    os.environ["DATABASE_URL"] = database_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatsite.settings")
    os.environ.setdefault("DEBUG", "1")  # a settings module that needs no SECRET_KEY
    django.setup()
    call_command("migrate", verbosity=0, interactive=False)


def ensure_database(database_url: str) -> None:
    import psycopg

    parts = urlsplit(database_url)
    name = parts.path.lstrip("/")
    admin_url = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin_url, autocommit=True, connect_timeout=3) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone() is None:
            conn.execute(f'CREATE DATABASE "{name}"')


@dataclass
class Servers:
    """One or two server processes (daphne unless the setup says) serving chatsite on consecutive
    loopback ports."""

    setup: Setup
    workdir: Path
    base_port: int
    engine_env: dict[str, str]
    conversations: int
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    conversation_ids: list[str] = field(default_factory=list)
    session: str = ""
    api_key: str = ""  # the bench user's API token, for the gateway (/v1/)
    metrics_token: str = field(default_factory=lambda: secrets.token_hex(16))
    env: dict[str, str] = field(default_factory=dict)
    # False: per-socket limits raised for the bench's clients, which send reply after reply and
    # Stop after Stop; True: chatsite's own defaults, for measuring what they protect.
    default_socket_limits: bool = False

    @property
    def ports(self) -> list[int]:
        return [self.base_port + i for i in range(self.setup.processes)]

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.env = self._environment()
        if self.setup.redis_url:
            import redis

            # The bench owns this Redis database: leftovers of an earlier run would be delivered.
            redis.Redis.from_url(self.setup.redis_url).flushdb()
        made = self._prepare_database()
        self.session, self.conversation_ids = made["session"], made["conversations"]
        self.api_key = made.get("token", "")
        for port in self.ports:
            log = self.workdir / f"{self.setup.server}-{port}.log"
            self.procs.append(
                start_server(
                    listen=port,
                    env=self.env,
                    log=log,
                    server=self.setup.server,
                    app=APP,
                    append_log=True,  # a setup's later starts add to its logs
                )
            )
        for port in self.ports:
            self._wait_ready(port)

    def _prepare_database(self) -> dict[str, Any]:
        """Migrate and make the bench user, its session and conversations.

        A SQLite run does this once: later starts copy the pristine file it left (migrating
        and starting Django for it takes seconds on a busy 2-core machine).
        """
        sqlite = not self.setup.database_url
        template = self.workdir.parent / "prepared.sqlite3"
        made_file = template.with_suffix(".json")
        if sqlite and made_file.exists():
            made: dict[str, Any] = json.loads(made_file.read_text())
            if len(made["conversations"]) >= self.conversations:
                shutil.copyfile(template, self.workdir / "bench.sqlite3")
                return made
        made = self._setup_db("--username", USERNAME, "--conversations", str(self.conversations))
        if sqlite:
            shutil.copyfile(self.workdir / "bench.sqlite3", template)
            made_file.write_text(json.dumps(made))
        return made

    def _environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")}
        database_url = self.setup.database_url or f"sqlite:///{self.workdir / 'bench.sqlite3'}"
        if not self.setup.database_url:
            (self.workdir / "bench.sqlite3").unlink(missing_ok=True)
        env.update(
            DJANGO_SETTINGS_MODULE=self.setup.settings,
            DEBUG="0",
            SECURE_COOKIES="0",  # plain HTTP on loopback
            SECRET_KEY=SECRET_KEY,
            ALLOWED_HOSTS="127.0.0.1",
            DATABASE_URL=database_url,
            CHAT_METRICS_TOKEN=self.metrics_token,
            # One bench user owns every stream; per-user limits would refuse most of them.
            CHAT_MAX_ACTIVE_PER_USER="1000000",
            CHAT_SENDS_PER_MINUTE="1000000",
            CHAT_CONVERSATIONS_PER_MINUTE="1000000",  # each gateway call starts one
            CHAT_MAX_PROMPT_CHARS="8000",
            LOG_LEVEL="INFO",
        )
        if not self.default_socket_limits:
            env.update(
                # A bench socket sends reply after reply and Stop after Stop, far faster than a
                # person, and one bench user holds every socket.
                CHAT_SOCKET_FRAMES_PER_SECOND="1000000",
                CHAT_SOCKET_FRAME_BURST="1000000",
                CHAT_USER_FRAMES_PER_SECOND="1000000",
                CHAT_USER_FRAME_BURST="1000000",
                CHAT_SOCKETS_PER_USER="1000000",
                CHAT_SOCKET_OPENS_PER_MINUTE="1000000",
            )
        env.update(self.engine_env)
        if self.setup.redis_url:
            env["REDIS_URL"] = self.setup.redis_url
        if self.setup.processes > 1:
            metrics_dir = self.workdir / "prometheus"
            shutil.rmtree(metrics_dir, ignore_errors=True)
            metrics_dir.mkdir()
            env["PROMETHEUS_MULTIPROC_DIR"] = str(metrics_dir)
        else:
            env.pop("PROMETHEUS_MULTIPROC_DIR", None)
        return env

    def _wait_ready(self, port: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(p.poll() is not None for p in self.procs):
                raise RuntimeError(f"the server exited; see the logs in {self.workdir}")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/accounts/login/", timeout=2).is_success:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"the server on port {port} did not answer within {timeout}s")

    def stop(self) -> None:
        stop_servers(self.procs, grace=15)
        self.procs.clear()

    def login(self) -> str:
        """The bench user's session cookie (made by setup_db; serves every socket and process)."""
        return self.session

    def another_user(self, username: str, conversations: int) -> tuple[str, list[str]]:
        """A second user's session cookie and conversations, in the running servers' database."""
        made = self._setup_db("--username", username, "--conversations", str(conversations))
        return made["session"], made["conversations"]

    def many_users(self, prefix: str, count: int) -> list[tuple[str, str]]:
        """`count` users, each with a session cookie and a conversation of its own."""
        made = self._setup_db("--username", prefix, "--users", str(count))
        return list(zip(made["sessions"], made["conversations"], strict=True))

    def _setup_db(self, *args: str) -> dict[str, Any]:
        """Run bench.setup_db with the servers' environment; what it printed."""
        command = [sys.executable, "-m", "bench.setup_db", *args]
        out = subprocess.run(command, env=self.env, cwd=ROOT, capture_output=True, text=True)
        if out.returncode:
            raise RuntimeError(f"database setup failed:\n{out.stderr[-3000:]}")
        made: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
        return made

    def records(self, request_ids: list[str]) -> dict[str, Any]:
        """The scripted engine's own records of these requests, from whichever process ran them."""
        found: dict[str, Any] = {}
        for start in range(0, len(request_ids), 200):
            ids = ",".join(request_ids[start : start + 200])
            for port in self.ports:
                url = f"http://127.0.0.1:{port}/__bench__/records"
                found.update(httpx.get(url, params={"ids": ids}, timeout=30).json())
        return found

    def scrape_metrics(self) -> str:
        url = f"http://127.0.0.1:{self.ports[0]}/metrics"
        headers = {"Authorization": f"Bearer {self.metrics_token}"}
        return httpx.get(url, headers=headers, timeout=30).text

    def processes(self) -> list[psutil.Process]:
        return [psutil.Process(p.pid) for p in self.procs]

    def cpu_seconds(self) -> float:
        return sum(sum(p.cpu_times()[:2]) for p in self.processes())

    def wait_idle(self, limit_s: float = 10, busy: float = 0.1) -> float:
        """Wait until the servers use under `busy` of a core (queued work done); return the wait.

        Sockets count as open once accepted, but each still has database reads queued behind
        the accept; a measurement that starts before they drain measures the backlog.
        """
        began = time.monotonic()
        last = self.cpu_seconds()
        while time.monotonic() - began < limit_s:
            time.sleep(0.5)
            now = self.cpu_seconds()
            if now - last < busy * 0.5:
                break
            last = now
        return time.monotonic() - began

    def rss(self) -> int:
        return sum(p.memory_info().rss for p in self.processes())


@contextmanager
def running(servers: Servers) -> Iterator[Servers]:
    try:
        servers.start()
        yield servers
    finally:
        servers.stop()


class PeakRss:
    """Samples the servers' summed RSS in a thread while a phase runs."""

    def __init__(self, servers: Servers, interval: float = 0.2):
        self.servers = servers
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            with suppress(psutil.Error):
                self.peak = max(self.peak, self.servers.rss())
            self._stop.wait(self.interval)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

"""The one way chatsite's ASGI server (daphne, or uvicorn) is started in a process of its own:
for the tests, the bench (bench/server.py) and the scripts (scripts/screenshots.py).

Standard library only, so that the bench and the scripts import it without Django or pytest.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

# The repository's root: servers, manage.py and `python -m bench` run from there.
ROOT = Path(__file__).resolve().parents[2]

CHATSITE_APP = "chatsite.asgi:application"
# The ASGI servers chatsite runs under, the two docs/deploy.md documents: uvicorn
# with uvloop, httptools and websockets, as a deployment would run it.
ASGI_SERVERS = ("daphne", "uvicorn")

# Where a server listens: a loopback port, or a socket already listening that it inherits.
Listen = int | socket.socket


def loopback_listener() -> socket.socket:
    """A socket listening on a free loopback port. A server given it (`listen=`) inherits it,
    so no other process can take the port between choosing it and serving on it."""
    return socket.create_server(("127.0.0.1", 0))


def server_args(server: str, app: str, listen: Listen) -> list[str]:
    """The arguments of `python` that serve `app` (module:attribute) under `server`."""
    if server not in ASGI_SERVERS:
        raise ValueError(f"not an ASGI server chatsite runs under: {server!r}")
    if isinstance(listen, socket.socket):
        where = ["--fd", str(listen.fileno())]
    elif server == "daphne":
        where = ["-b", "127.0.0.1", "-p", str(listen)]
    else:
        where = ["--host", "127.0.0.1", "--port", str(listen)]
    if server == "daphne":
        return ["-m", "daphne", *where, app]
    return [
        *("-m", "uvicorn", *where),
        *("--loop", "uvloop", "--http", "httptools", "--ws", "websockets"),
        *("--lifespan", "off", "--no-access-log", app),
    ]


def start_server(
    *,
    listen: Listen,
    env: dict[str, str],
    log: Path,
    server: str = "daphne",
    app: str = CHATSITE_APP,
    append_log: bool = False,
) -> subprocess.Popen[bytes]:
    """Start `server` serving `app` from the repository root with exactly `env` as its
    environment, its stdout and stderr in the file `log` (appended to with `append_log`).

    It returns once the process is started, not once it serves: see wait_until_serving.
    """
    inherited = [listen.fileno()] if isinstance(listen, socket.socket) else []
    with log.open("ab" if append_log else "wb") as output:
        return subprocess.Popen(
            [sys.executable, *server_args(server, app, listen)],
            cwd=ROOT,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            pass_fds=inherited,
        )


def wait_until_serving(
    process: subprocess.Popen[bytes],
    ready: Callable[[], bool],
    *,
    name: str,
    log: Callable[[], str],
    timeout: float = 30,
    interval: float = 0.1,
) -> None:
    """Wait until `ready()`; fail at once, with the server's log, if the process exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited with {process.returncode}:\n{log()}")
        if ready():
            return
        time.sleep(interval)
    raise TimeoutError(f"{name} did not start within {timeout:.0f} s:\n{log()}")


def stop_servers(processes: Iterable[subprocess.Popen[bytes]], *, grace: float) -> None:
    """SIGTERM to every one still running, then SIGKILL to any not gone within `grace` s."""
    running = [process for process in processes if process.poll() is None]
    for process in running:
        process.terminate()
    for process in running:
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

"""`manage.py serve` (issue 25): the production server starts only when the settings are fit for
it, and says what to change otherwise."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.servers import NEEDS_SHARED_SERVICES, ROOT, free_port, server_env

pytestmark = pytest.mark.django_db(transaction=True)

GOOD_KEY = "k3Y-z" * 13  # 65 characters of 5 kinds, as Django asks at least


def serve(*args: str, timeout: float = 60, **env: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", "serve", *args],
        cwd=ROOT,
        env=server_env(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.parametrize(
    ("env", "args", "said"),
    [
        ({"DEBUG": "1"}, [], "DEBUG is on"),
        ({"SECRET_KEY": "short"}, [], "SECRET_KEY is missing or weak"),
        ({"ALLOWED_HOSTS": "*"}, [], "ALLOWED_HOSTS is empty or '*'"),
        ({"REDIS_URL": ""}, ["--workers", "2"], "2 workers need REDIS_URL"),
        ({"DATABASE_URL": "sqlite:///x.sqlite3"}, ["--workers", "1"], "The database is SQLite"),
    ],
)
def test_an_insecure_or_unworkable_start_is_refused_with_what_to_change(
    env: dict[str, str], args: list[str], said: str
) -> None:
    ran = serve("--check", *args, **{"SECRET_KEY": GOOD_KEY, **env})
    assert ran.returncode != 0
    assert "Refusing to serve" in ran.stderr and said in ran.stderr, ran.stderr


def test_fit_settings_pass_the_check() -> None:
    ran = serve("--check", "--workers", "1", "--allow-sqlite", SECRET_KEY=GOOD_KEY,
                DATABASE_URL="sqlite:///x.sqlite3", REDIS_URL="")  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert "fit for a production start" in ran.stdout


@pytest.mark.processes
@NEEDS_SHARED_SERVICES
def test_it_serves_with_several_workers(tmp_path: Path) -> None:
    port = free_port()
    log = (tmp_path / "serve.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--workers", "2", "--host", "127.0.0.1",
         "--port", str(port)],
        cwd=ROOT, env=server_env(SECRET_KEY=GOOD_KEY), stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
                break
            except httpx.TransportError:
                assert process.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
                assert time.monotonic() < deadline, "the server never answered"
                time.sleep(0.3)
        assert health.status_code == 200
        assert "2 workers" in (tmp_path / "serve.log").read_text()
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()

"""SQLite as a default that holds up: sends wait for other writers instead of failing.

These run on a real SQLite file in a fresh interpreter (tests/support/sqlite_scenarios.py), so they
test the file's locking whatever database the rest of the suite runs on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.ops.test_settings import database, settings_run
from tests.support.servers import ROOT


def scenario(name: str, tmp_path: Path) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_", "SQLITE_"))}
    env.pop("REDIS_URL", None)
    env.update(
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        DEBUG="1",
        SECRET_KEY="sqlite-test",
        CHAT_ENGINE="scripted",
        # The sends are what is tested, not the per-user limits.
        CHAT_MAX_ACTIVE_PER_USER="1000",
        CHAT_SENDS_PER_MINUTE="1000",
    )
    result = subprocess.run(
        [sys.executable, "-m", "tests.support.sqlite_scenarios", name],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return data


def test_it_waits_for_a_connection_holding_the_write_lock(tmp_path: Path) -> None:
    result = scenario("lock_held", tmp_path)
    assert result["held"] is True  # another connection took the lock as the send began
    assert result["send"] == "ok"
    assert result["waited_s"] >= 0.25  # it waited for the other connection's commit


def test_it_fails_no_send_while_another_user_renames_and_creates(tmp_path: Path) -> None:
    result = scenario("concurrent_writes", tmp_path)
    assert result["renames"] > 0 and result["creates"] > 0
    assert result["writes_failed"] == 0
    assert (result["sends"], result["failed"], result["errors"]) == (30, 0, [])


def test_it_keeps_the_file_in_wal_mode(tmp_path: Path) -> None:
    assert scenario("journal_mode", tmp_path) == {"journal_mode": "wal"}


def test_it_reads_the_busy_timeout_from_the_environment() -> None:
    db = database(
        DATABASE_URL="sqlite:////tmp/chatsite-settings-test.sqlite3", SQLITE_BUSY_TIMEOUT_S="5"
    )
    assert db["OPTIONS"] == {
        "timeout": 5.0,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }


def test_it_refuses_a_busy_timeout_that_is_not_a_number() -> None:
    result = settings_run(SQLITE_BUSY_TIMEOUT_S="soon")
    assert result.returncode != 0
    assert "SQLITE_BUSY_TIMEOUT_S must be a number; got 'soon'." in result.stderr

"""Settings built from the environment: database connections per request, pooled on PostgreSQL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
from django.db import connection

from tests.support.servers import ROOT

PRINT_DATABASE = (
    "import json, chatsite.settings as s; print(json.dumps(s.DATABASES['default'], default=str))"
)


def settings_run(**env: str) -> subprocess.CompletedProcess[str]:
    """Import chatsite.settings in a fresh interpreter with these variables (and no DATABASE_*)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("DATABASE_")}
    base.update(SECRET_KEY="settings-test", **env)
    return subprocess.run(
        [sys.executable, "-c", PRINT_DATABASE],
        cwd=ROOT,
        env=base,
        capture_output=True,
        text=True,
        timeout=60,
    )


def database(**env: str) -> dict[str, Any]:
    result = settings_run(**env)
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_it_pools_postgresql_connections() -> None:
    db = database(
        DATABASE_URL="postgres://chatsite@db.example:5432/chatsite",
        DATABASE_POOL_MIN_SIZE="1",
        DATABASE_POOL_MAX_SIZE="7",
    )
    assert db["ENGINE"] == "django.db.backends.postgresql"
    assert db["CONN_MAX_AGE"] == 0  # Django's pool refuses persistent connections
    assert db["CONN_HEALTH_CHECKS"] is True
    assert db["OPTIONS"]["pool"] == {"min_size": 1, "max_size": 7, "timeout": 10.0}


def test_it_opens_sqlite_connections_per_request() -> None:
    db = database(DATABASE_URL="sqlite:////tmp/chatsite-settings-test.sqlite3")
    assert db["ENGINE"] == "django.db.backends.sqlite3"
    assert db["CONN_MAX_AGE"] == 0
    assert "pool" not in db["OPTIONS"]
    assert db["OPTIONS"]["timeout"] == 20


def test_it_defaults_to_sqlite_without_a_pool() -> None:
    db = database()
    assert db["ENGINE"] == "django.db.backends.sqlite3"
    assert db["CONN_MAX_AGE"] == 0
    assert "pool" not in db["OPTIONS"]


def test_it_refuses_the_list_channel_layer_and_names_the_pub_sub_one() -> None:
    """Issue 25: the list layer drops frames once a process's channels are full; it is refused
    at start rather than kept as a slower way that loses frames."""
    result = settings_run(REDIS_URL="redis://127.0.0.1:6379/0", CHANNEL_LAYER_BACKEND="redis")
    assert result.returncode != 0
    assert "CHANNEL_LAYER_BACKEND=redis (channels-redis's list layer) is not supported" in (
        result.stderr
    )
    assert "CHANNEL_LAYER_BACKEND=pubsub, the default" in result.stderr
    other = settings_run(CHANNEL_LAYER_BACKEND="kafka")
    assert other.returncode != 0 and "must be pubsub" in other.stderr


def test_it_refuses_database_conn_max_age() -> None:
    result = settings_run(
        DATABASE_URL="postgres://chatsite@db.example:5432/chatsite", DATABASE_CONN_MAX_AGE="60"
    )
    assert result.returncode != 0
    assert "ImproperlyConfigured: DATABASE_CONN_MAX_AGE is no longer supported" in result.stderr


def test_it_refuses_a_pool_smaller_than_its_minimum() -> None:
    result = settings_run(
        DATABASE_URL="postgres://chatsite@db.example:5432/chatsite",
        DATABASE_POOL_MIN_SIZE="5",
        DATABASE_POOL_MAX_SIZE="2",
    )
    assert result.returncode != 0
    assert "DATABASE_POOL_MAX_SIZE (2) must be at least DATABASE_POOL_MIN_SIZE (5)" in (
        result.stderr
    )


def test_it_refuses_more_send_threads_than_the_pool_can_serve() -> None:
    result = settings_run(
        DATABASE_URL="postgres://chatsite@db.example:5432/chatsite",
        DATABASE_POOL_MIN_SIZE="1",
        DATABASE_POOL_MAX_SIZE="4",
    )
    assert result.returncode != 0
    assert "CHAT_SEND_THREADS (4) must be under DATABASE_POOL_MAX_SIZE" in result.stderr
    fewer = settings_run(
        DATABASE_URL="postgres://chatsite@db.example:5432/chatsite",
        DATABASE_POOL_MAX_SIZE="4",
        CHAT_SEND_THREADS="2",
    )
    assert fewer.returncode == 0, fewer.stderr


@pytest.mark.django_db
def test_it_runs_the_suite_on_the_pooled_test_database() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("the pool is PostgreSQL's")
    assert connection.pool is not None
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_database()")
        (name,) = cursor.fetchone()
    # The pool was created after the test database replaced the configured one.
    assert name.startswith("test_")


PRINT_TRANSPORT = (
    "import json, chatsite.settings as s; print(json.dumps([s.SESSION_COOKIE_SECURE, "
    "s.CSRF_COOKIE_SECURE, getattr(s, 'SECURE_HSTS_SECONDS', 0)]))"
)


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"DEBUG": "0"}, [True, True, 31536000]),
        ({"DEBUG": "0", "SECURE_COOKIES": "0"}, [False, False, 0]),
        ({"DEBUG": "1"}, [False, False, 0]),
    ],
    ids=["production", "plain-http-opt-out", "debug"],
)
def test_cookies_are_secure_and_hsts_on_by_default_in_production(
    env: dict[str, str], expected: list[object]
) -> None:
    base = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "SECURE_COOKIES")}
    result = subprocess.run(
        [sys.executable, "-c", PRINT_TRANSPORT],
        cwd=ROOT,
        env={**base, "SECRET_KEY": "settings-test", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == expected


@pytest.mark.parametrize("value", ["{not json", "[1, 2]"])
def test_it_refuses_vllm_engine_args_that_are_not_a_json_object(value: str) -> None:
    result = settings_run(CHAT_VLLM_ENGINE_ARGS=value)
    assert result.returncode != 0
    assert "CHAT_VLLM_ENGINE_ARGS must be a JSON object" in result.stderr

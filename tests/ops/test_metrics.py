"""/metrics: who may read it, and that its values move when replies stream, stop and fail."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from tests.support.sockets import finished

TOKEN = "scraper-token-for-tests"


def scrape(client: Client, **headers: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = client.get("/metrics", headers=headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    return parse(response.content.decode())


def parse(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the exposition, keyed by name and sorted labels."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.fixture
def staff_client(alice: Any) -> Client:
    alice.is_staff = True
    alice.save()
    client = Client()
    client.force_login(alice)
    return client


@pytest.mark.django_db
def test_it_refuses_anonymous_requests(client: Client) -> None:
    response = client.get("/metrics")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.django_db
def test_it_refuses_a_user_who_is_not_staff(client: Client, charlie: Any) -> None:
    client.force_login(charlie)
    assert client.get("/metrics").status_code == 403


@pytest.mark.django_db
def test_it_shows_metrics_to_staff(staff_client: Client) -> None:
    body = staff_client.get("/metrics").content.decode()
    assert "chatsite_time_to_first_token_seconds" in body
    assert "chatsite_open_sockets" in body


@pytest.mark.django_db
def test_it_accepts_the_configured_token(client: Client, settings: Any) -> None:
    settings.CHAT_METRICS_TOKEN = TOKEN
    samples = scrape(client, Authorization=f"Bearer {TOKEN}")
    assert ("chatsite_open_sockets", ()) in samples


@pytest.mark.django_db
def test_it_refuses_a_wrong_token(client: Client, settings: Any, charlie: Any) -> None:
    settings.CHAT_METRICS_TOKEN = TOKEN
    assert client.get("/metrics", headers={"Authorization": "Bearer nope"}).status_code == 401
    client.force_login(charlie)
    assert client.get("/metrics", headers={"Authorization": "Bearer nope"}).status_code == 403


@pytest.mark.django_db
def test_it_accepts_no_token_when_none_is_configured(client: Client, settings: Any) -> None:
    settings.CHAT_METRICS_TOKEN = ""
    assert client.get("/metrics", headers={"Authorization": "Bearer "}).status_code == 401


@pytest.mark.django_db(transaction=True)
async def test_it_counts_a_streamed_reply(
    connect: Any, alice: Any, conversation: Any, staff_client: Client
) -> None:
    read = database_sync_to_async(scrape)
    before = await read(staff_client)
    socket, _, _ = await connect(alice, conversation.pk)
    during = await read(staff_client)
    assert value(during, "chatsite_open_sockets") == value(before, "chatsite_open_sockets") + 1

    await socket.send(action="send", content="Hello")
    events = await socket.receive_until(finished)
    assert events[-1]["message"]["status"] == "complete"
    after = await read(staff_client)

    done = {"engine": "scripted", "status": "complete"}
    moved = {
        name: value(after, name, **done) - value(before, name, **done)
        for name in (
            "chatsite_tokens_generated_total",
            "chatsite_time_to_first_token_seconds_count",
            "chatsite_inter_token_latency_seconds_count",
            "chatsite_generation_duration_seconds_count",
        )
    }
    assert moved == {
        "chatsite_tokens_generated_total": 40,
        "chatsite_time_to_first_token_seconds_count": 1,
        "chatsite_inter_token_latency_seconds_count": 39,
        "chatsite_generation_duration_seconds_count": 1,
    }
    assert value(after, "chatsite_generation_duration_seconds_sum", **done) > value(
        before, "chatsite_generation_duration_seconds_sum", **done
    )
    active = value(after, "chatsite_active_generations", engine="scripted")
    assert active == value(before, "chatsite_active_generations", engine="scripted")

    await socket.close()
    closed = await read(staff_client)
    assert value(closed, "chatsite_open_sockets") == value(before, "chatsite_open_sockets")


@pytest.mark.django_db(transaction=True)
async def test_it_times_a_cancel(
    connect: Any, alice: Any, conversation: Any, staff_client: Client, scripted_engine: Any
) -> None:
    scripted_engine.tokens = 1000
    before = await database_sync_to_async(scrape)(staff_client)
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="Count forever")
    await socket.receive_until(lambda e: e["type"] == "message.delta")
    during = await database_sync_to_async(scrape)(staff_client)
    assert value(during, "chatsite_active_generations", engine="scripted") == (
        value(before, "chatsite_active_generations", engine="scripted") + 1
    )

    await socket.send(action="cancel")
    events = await socket.receive_until(finished)
    reply = events[-1]["message"]
    assert reply["status"] == "cancelled"
    after = await database_sync_to_async(scrape)(staff_client)

    cancelled = {"engine": "scripted", "status": "cancelled"}
    count = "chatsite_cancel_latency_seconds_count"
    assert value(after, count, **cancelled) == value(before, count, **cancelled) + 1
    tokens = "chatsite_tokens_generated_total"
    assert (
        value(after, tokens, **cancelled) - value(before, tokens, **cancelled)
        == (reply["completion_tokens"])
    )
    latency = value(after, "chatsite_cancel_latency_seconds_sum", **cancelled) - value(
        before, "chatsite_cancel_latency_seconds_sum", **cancelled
    )
    # The same two timestamps the row keeps, so the metric and the API agree.
    assert latency * 1000 == pytest.approx(reply["cancel_latency_ms"], abs=1)


@pytest.mark.django_db(transaction=True)
async def test_it_counts_engine_errors(
    connect: Any, alice: Any, conversation: Any, staff_client: Client, scripted_engine: Any
) -> None:
    scripted_engine.fail_after = 3
    before = await database_sync_to_async(scrape)(staff_client)
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="Fail please")
    events = await socket.receive_until(finished)
    assert events[-1]["message"]["status"] == "error"
    after = await database_sync_to_async(scrape)(staff_client)

    errors = "chatsite_engine_errors_total"
    assert value(after, errors, engine="scripted") == value(before, errors, engine="scripted") + 1
    failed = {"engine": "scripted", "status": "error"}
    tokens = "chatsite_tokens_generated_total"
    assert value(after, tokens, **failed) - value(before, tokens, **failed) == 3


RECORD = """
import django; django.setup()
from conversations.ops import metrics
observer = metrics.GenerationObserver("scripted", "r")
observer.token(); observer.token()
observer.finished("complete", tokens=2)
metrics.socket_opened()
"""

SHOW = """
import django; django.setup()
from prometheus_client import generate_latest
from conversations.ops import metrics
metrics.socket_opened()
print(generate_latest(metrics.registry()).decode())
"""


def test_it_adds_up_several_processes(tmp_path: Path) -> None:
    """Two processes that have exited and one still running: counters add up, and only the
    running process's open sockets count."""
    env = {
        **os.environ,
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path),
        "DJANGO_SETTINGS_MODULE": "chatsite.settings",
    }
    env.setdefault("SECRET_KEY", "tests-only-secret-key-not-for-production")
    for _ in range(2):
        subprocess.run([sys.executable, "-c", RECORD], env=env, check=True, timeout=60)
    shown = subprocess.run(
        [sys.executable, "-c", SHOW],
        env=env,
        check=True,
        timeout=60,
        capture_output=True,
        text=True,
    ).stdout
    samples = parse(shown)
    done = {"engine": "scripted", "status": "complete"}
    assert value(samples, "chatsite_tokens_generated_total", **done) == 4
    assert value(samples, "chatsite_time_to_first_token_seconds_count", **done) == 2
    assert value(samples, "chatsite_inter_token_latency_seconds_count", **done) == 2
    assert value(samples, "chatsite_open_sockets") == 1
    assert value(samples, "chatsite_active_generations", engine="scripted") == 0

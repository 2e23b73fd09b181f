"""Issue 23, finding 15: /readyz, which needs no login, named every model, a group's own
included, and each probe sent a request to every model server. Now it counts the models by
state for everyone but staff, and one probe's answer serves the probes of the next few seconds.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from conversations import engines
from conversations.engines import catalogue
from conversations.ops import health
from tests.support.servers import models_server

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def no_probe_yet() -> Iterator[None]:
    health.forget_probe()
    yield
    health.forget_probe()


@contextlib.contextmanager
def counting_upstream() -> Iterator[tuple[str, list[str]]]:
    """An OpenAI-compatible server's GET /v1/models, and the paths it was asked for."""
    asked: list[str] = []
    with models_server(asked) as base_url:
        yield base_url, asked


def declare(settings: Any, base_url: str) -> None:
    """A model for everyone and a group's own on a server of its own, both loaded (a load runs
    on a thread: a probe during it would say `loading`)."""
    settings.CHAT_MODELS = json.dumps(
        [
            {"slug": "everyone", "backend": "scripted"},
            {
                "slug": "research-only",
                "backend": "openai",
                "model": "up-1",
                "groups": ["research"],
                "options": {"base_url": base_url},
            },
        ]
    )
    for spec in catalogue.all_models():
        engines.start_loading(spec).result(timeout=10)


def staff_client() -> Client:
    staff = get_user_model().objects.create_user("ops", password="ops-password", is_staff=True)
    client = Client()
    client.force_login(staff)
    return client


def test_finding_15_it_names_no_model_but_to_staff(settings: Any, alice: Any) -> None:
    with counting_upstream() as (base_url, _):
        declare(settings, base_url)
        signed_in = Client()
        signed_in.force_login(alice)
        for client in (Client(), signed_in):
            response = client.get("/readyz")
            assert response.status_code == 200
            assert "research" not in response.content.decode()
            assert response.json()["models"] == {"ready": 2}

        assert staff_client().get("/readyz").json()["models"] == {
            "everyone": "ready",
            "research-only": "ready",
        }


def test_finding_15_it_asks_a_model_s_server_once_in_a_few_seconds(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [1000.0]
    monkeypatch.setattr(health, "monotonic", lambda: now[0])
    with counting_upstream() as (base_url, asked):
        declare(settings, base_url)
        client = Client()
        for _ in range(20):
            assert client.get("/readyz").status_code == 200
        assert asked == ["/v1/models"]

        now[0] += health.READY_CACHE_S
        assert client.get("/readyz").status_code == 200
        assert asked == ["/v1/models"] * 2

"""/healthz and /readyz: what a load balancer or an orchestrator is told, and when."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from channels.layers import channel_layers
from django.contrib.auth import get_user_model
from django.test import Client

from conversations.ops import health
from tests.support.servers import free_port, models_server

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def every_probe_afresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about what a probe finds: test_finding_15_readyz.py is about how long
    its answer is kept, and who is told the models' names."""
    monkeypatch.setattr(health, "READY_CACHE_S", 0.0)
    health.forget_probe()


@pytest.fixture
def client(db: Any) -> Client:
    """A staff member's: staff see each model by name."""
    staff = get_user_model().objects.create_user("ops", password="ops-password", is_staff=True)
    client = Client()
    client.force_login(staff)
    return client


def ready(client: Client, *, until: int, timeout: float = 10.0) -> Any:
    """/readyz, asked again until it answers `until` (a model's load runs on a thread)."""
    deadline = time.monotonic() + timeout
    while True:
        response = client.get("/readyz")
        if response.status_code == until or time.monotonic() > deadline:
            return response
        time.sleep(0.05)


def declare(settings: Any, *models: dict[str, Any]) -> None:
    settings.CHAT_MODELS = json.dumps(list(models))


def test_healthz_answers_while_the_process_runs(client: Client) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert "no-cache" in response["Cache-Control"]


def test_readyz_is_ready_once_every_model_is_loaded(client: Client, settings: Any) -> None:
    declare(
        settings,
        {"slug": "a", "backend": "scripted"},
        {"slug": "b", "backend": "scripted", "options": {"load_s": 0.5}},
        {"slug": "off", "backend": "scripted", "enabled": False},
    )
    first = client.get("/readyz")
    assert first.status_code == 503
    assert first.json()["models"]["b"] == "loading"

    response = ready(client, until=200)
    assert response.status_code == 200
    assert response.json() == {
        "status": "ok",
        "database": "ok",
        "channel_layer": "ok",
        "models": {"a": "ready", "b": "ready"},
    }


def test_readyz_fails_while_a_model_s_server_is_unreachable(client: Client, settings: Any) -> None:
    port = free_port()  # nothing listens there
    local = {"slug": "local", "backend": "scripted"}
    remote = {
        "slug": "remote",
        "backend": "openai",
        "model": "up-1",
        "options": {"base_url": f"http://127.0.0.1:{port}/v1", "timeout": 1},
    }
    declare(settings, local, remote)
    response = ready(client, until=200, timeout=2)
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert body["models"] == {"local": "ready", "remote": "unavailable"}
    assert str(port) not in response.content.decode(), "details go to the log, not the probe"

    with models_server() as base_url:
        declare(settings, local, {**remote, "options": {"base_url": base_url}})
        assert ready(client, until=200).json()["models"] == {"local": "ready", "remote": "ready"}


def test_readyz_fails_while_a_model_cannot_load(client: Client, settings: Any) -> None:
    declare(settings, {"slug": "lost", "backend": "llamacpp", "model": "/no/such/model.gguf"})
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["models"] == {"lost": "unavailable"}


def test_readyz_fails_while_the_channel_layer_is_down(client: Client, settings: Any) -> None:
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [f"redis://127.0.0.1:{free_port()}/0"]},
        }
    }
    channel_layers.backends.clear()
    try:
        response = ready(client, until=200, timeout=1)
    finally:
        channel_layers.backends.clear()
    assert response.status_code == 503
    assert response.json()["channel_layer"] in {"unavailable", "timeout"}


def test_the_picker_and_the_api_show_a_model_whose_server_is_away(
    client: Client, settings: Any, alice: Any, conversation: Any
) -> None:
    remote = {
        "slug": "remote",
        "name": "Remote",
        "backend": "openai",
        "model": "up-1",
        "options": {"base_url": f"http://127.0.0.1:{free_port()}/v1"},
    }
    declare(settings, {"slug": "local", "name": "Local", "backend": "scripted"}, remote)
    ready(client, until=200, timeout=1)  # the probe finds the server away
    client.force_login(alice)
    page = client.get(conversation.get_absolute_url()).content.decode()
    assert "Remote (unavailable)" in page
    statuses = {m["slug"]: m["status"] for m in client.get("/api/models/").json()}
    assert statuses == {"local": "ready", "remote": "unavailable"}

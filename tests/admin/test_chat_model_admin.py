"""Problem 4, the admin's side: a model's backend from a list, its options checked per backend,
an API key stored encrypted and never shown back, and the connection test against a real
OpenAI-compatible server (chatsite's own gateway on a live daphne)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.db import connection
from django.test import Client
from django.urls import reverse

from conversations.engines import catalogue, get_engine
from conversations.models import ChatModel
from conversations.models.encryption import decrypt
from conversations.services.tokens import api_token_create
from tests.support import servers as live
from tests.support.servers import NEEDS_SHARED_SERVICES, free_port

pytestmark = pytest.mark.django_db

ADD = "admin:conversations_chatmodel_add"
TEST = "admin:conversations_chatmodel_test_connection"
SECRET = "sk-upstream-secret-4711"


def model_form(**fields: Any) -> dict[str, Any]:
    return {
        "name": "Upstream",
        "slug": "upstream",
        "backend": "openai",
        "base_url": "http://127.0.0.1:9/v1",
        "api_key": "",
        "api_key_env": "",
        "model_id": "up-1",
        "options": "{}",
        "context_tokens": 8192,
        "system_prompt": "",
        "temperature": 0.7,
        "max_tokens": 512,
        "max_temperature": 2,
        "max_tokens_limit": 4096,
        "enabled": "on",
        "position": 0,
        **fields,
    }


def stored_ciphertext(slug: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT api_key_encrypted FROM conversations_chatmodel WHERE slug = %s", [slug]
        )
        (value,) = cursor.fetchone()
    return str(value)


def test_it_chooses_the_backend_from_a_list(superuser: Client) -> None:
    page = superuser.get(reverse(ADD)).content.decode()
    backends = re.search(r'<select name="backend".*?</select>', page, re.S)
    assert backends is not None, "a list, not a free-text field"
    assert re.findall(r'<option value="(\w+)"', backends.group(0)) == [
        "scripted",
        "llamacpp",
        "openai",
        "vllm",
    ]
    assert 'list="server-models"' in page, "the model field offers the server's models"
    assert "Test connection" in page


def test_it_stores_the_api_key_encrypted_and_never_shows_it(superuser: Client) -> None:
    response = superuser.post(reverse(ADD), model_form(api_key=SECRET))
    assert response.status_code == 302, response.content.decode()[:3000]
    raw = stored_ciphertext("upstream")
    assert raw and SECRET not in raw, "the column holds ciphertext"
    assert decrypt(raw) == SECRET
    row = ChatModel.objects.get(slug="upstream")
    change = reverse("admin:conversations_chatmodel_change", args=[row.pk])
    page = superuser.get(change).content.decode()
    assert SECRET not in page and raw not in page
    assert "A key is stored." in page

    # A blank field keeps the key; the engine built from the row uses it, no restart needed.
    kept = superuser.post(change, model_form(name="Upstream, renamed"))
    assert kept.status_code == 302
    row.refresh_from_db()
    assert (row.name, row.api_key) == ("Upstream, renamed", SECRET)
    spec = catalogue.spec_of(row)
    assert SECRET not in repr(spec)
    assert get_engine(spec).api_key == SECRET  # type: ignore[attr-defined]

    # A new key is a new engine at the next reply; "Remove" forgets the key.
    superuser.post(change, model_form(api_key="sk-rotated"))
    row.refresh_from_db()
    rotated = catalogue.spec_of(row)
    assert rotated.engine_key != spec.engine_key
    assert get_engine(rotated).api_key == "sk-rotated"  # type: ignore[attr-defined]
    superuser.post(change, model_form(clear_api_key="on"))
    row.refresh_from_db()
    assert (row.api_key_encrypted, row.api_key) == ("", "")


def test_a_key_encrypted_with_another_key_reads_as_none(superuser: Client, settings: Any) -> None:
    superuser.post(reverse(ADD), model_form(api_key=SECRET))
    # CHAT_FIELD_ENCRYPTION_KEY set later (or SECRET_KEY changed): the old ciphertext is unreadable.
    settings.CHAT_FIELD_ENCRYPTION_KEY = Fernet.generate_key().decode()
    row = ChatModel.objects.get(slug="upstream")
    assert row.api_key == ""
    page = superuser.get(reverse("admin:conversations_chatmodel_change", args=[row.pk]))
    assert "cannot be read with this server" in page.content.decode()


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        (
            {"options": '{"threads": 4}'},
            "The openai backend has no option &#x27;threads&#x27; (it reads base_url, "
            "api_key_env, timeout).",
        ),
        ({"options": '{"timeout": "soon"}'}, "The option &#x27;timeout&#x27; has the wrong type"),
        (
            {"backend": "scripted", "options": '{"echo": 1}'},
            "The option &#x27;echo&#x27; has the wrong type",
        ),
        ({"options": "[1, 2]"}, "Options are a JSON object"),
        ({"base_url": "upstream:8000"}, "The base URL must start with http:// or https://."),
    ],
)
def test_it_checks_the_options_per_backend(
    superuser: Client, fields: dict[str, Any], error: str
) -> None:
    response = superuser.post(reverse(ADD), model_form(**fields))
    assert response.status_code == 200
    assert error in response.content.decode()
    assert not ChatModel.objects.exists()


def test_a_backend_s_own_options_are_accepted(superuser: Client) -> None:
    response = superuser.post(
        reverse(ADD),
        model_form(backend="scripted", base_url="", options='{"tokens": 5, "delay_ms": 0}'),
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    assert ChatModel.objects.get().options == {"tokens": 5, "delay_ms": 0}


def test_the_connection_test_says_when_nothing_answers(superuser: Client) -> None:
    answer = superuser.post(
        reverse(TEST), {"base_url": f"http://127.0.0.1:{free_port()}/v1", "api_key": "k"}
    ).json()
    assert answer["ok"] is False
    assert "Could not connect to the model server" in answer["error"]
    bad = superuser.post(reverse(TEST), {"base_url": "ftp://example.com"}).json()
    assert bad == {"ok": False, "error": "The base URL must start with http:// or https://."}


def test_only_staff_who_manage_models_may_test_a_connection(reviewer: Client, charlie: Any) -> None:
    assert reviewer.post(reverse(TEST), {"base_url": "http://127.0.0.1:9/v1"}).status_code == 403
    stranger = Client()
    stranger.force_login(charlie)
    response = stranger.post(reverse(TEST), {"base_url": "http://127.0.0.1:9/v1"})
    assert response.status_code == 302 and "/login/" in response["Location"]


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
@NEEDS_SHARED_SERVICES
def test_the_connection_test_lists_a_real_server_s_models(
    tmp_path: Path, superuser: Client, alice: Any
) -> None:
    key = api_token_create(user=alice, name="upstream for the admin")[1]
    with live.servers(1, tmp_path) as (server,):
        check_the_connection(superuser, f"{server.origin}/v1", key)


def check_the_connection(superuser: Client, base_url: str, key: str) -> None:
    answer = superuser.post(reverse(TEST), {"base_url": base_url, "api_key": key}).json()
    assert answer == {"ok": True, "summary": "Connected: 1 model", "models": ["default"]}

    refused = superuser.post(reverse(TEST), {"base_url": base_url, "api_key": "wrong"}).json()
    assert refused["ok"] is False and "HTTP 401" in refused["error"]

    # A saved row's key is used when the field is left blank (it is never sent to the page).
    superuser.post(reverse(ADD), model_form(base_url=base_url, api_key=key, model_id="default"))
    row = ChatModel.objects.get(slug="upstream")
    kept = superuser.post(
        reverse(TEST), {"base_url": base_url, "api_key": "", "object_id": str(row.pk)}
    ).json()
    assert kept["ok"] is True and kept["models"][0] == "default"

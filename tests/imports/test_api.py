"""POST /api/imports/: the report, the errors, who may import, and what others see."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from conversations.imports.importer import ALREADY_IMPORTED
from conversations.models import Conversation
from tests.imports.helpers import upload
from tests.imports.sources import as_json, chatgpt_branched, chatgpt_zip, claude_conversation

pytestmark = pytest.mark.django_db


def test_it_answers_with_what_was_imported_and_skipped(alice: Any, alice_api: Client) -> None:
    response = alice_api.post("/api/imports/", {"file": upload(chatgpt_zip(chatgpt_branched()))})

    assert response.status_code == 201
    body = response.json()
    chat = Conversation.objects.get(owner=alice)
    assert body == {
        "format": "chatgpt",
        "imported": [
            {
                "id": str(chat.pk),
                "title": "Arithmetic",
                "messages": 6,
                "url": f"/conversations/{chat.pk}/",
            }
        ],
        "skipped": [
            {
                "title": "Arithmetic",
                "external_id": "c0ffee00-0000-4000-8000-000000000001",
                "reason": "tool calls and tool results are not imported",
                "messages": 2,
            }
        ],
        "stopped": "",
    }

    again = alice_api.post("/api/imports/", {"file": upload(chatgpt_zip(chatgpt_branched()))})
    assert again.status_code == 201
    assert again.json()["imported"] == []
    assert again.json()["skipped"][0]["reason"] == ALREADY_IMPORTED


def test_format_and_keep_partial_are_taken_from_the_form(alice: Any, alice_api: Client) -> None:
    good = claude_conversation()
    bad = claude_conversation("bad") | {"chat_messages": "nope", "name": "Bad"}
    data = as_json([good, bad])

    refused = alice_api.post("/api/imports/", {"file": upload(data, "c.json"), "format": "claude"})
    assert refused.status_code == 400
    assert refused.json()["code"] == "bad_conversation"
    assert not Conversation.objects.exists()

    kept = alice_api.post(
        "/api/imports/",
        {"file": upload(data, "c.json"), "format": "claude", "keep_partial": "true"},
    )
    assert kept.status_code == 201
    assert [i["title"] for i in kept.json()["imported"]] == ["Planning a trip"]
    assert kept.json()["skipped"][-1] == {
        "title": "Bad",
        "external_id": "",
        "reason": "Its `chat_messages` is not a list.",
        "messages": None,
    }


@pytest.mark.parametrize(
    ("form", "code", "detail"),
    [
        ({}, "no_file", "file: No file was submitted."),
        (
            {"file": b"not json at all"},
            "not_json",
            "The file is not an export chatsite reads: a JSON list or object, JSON lines, or a "
            "zip holding one.",
        ),
        (
            {"file": b"[]", "format": "gemini"},
            "bad_format",
            'format: "gemini" is not a valid choice.',
        ),
        (
            {"file": b'[{"hello": "world"}]'},
            "unknown_format",
            "The file holds JSON, but not conversations of a format chatsite imports (ChatGPT, "
            "Claude, Open WebUI, chatsite).",
        ),
    ],
)
def test_a_bad_request_gets_a_clear_error(
    alice_api: Client, form: dict[str, Any], code: str, detail: str
) -> None:
    if "file" in form:
        form = form | {"file": upload(form["file"], "x.json")}

    response = alice_api.post("/api/imports/", form)

    assert response.status_code == 400
    assert response.json() == {"code": code, "detail": detail}


def test_an_upload_over_the_limit_is_refused(alice_api: Client, settings: Any) -> None:
    settings.CHAT_IMPORT_MAX_BYTES = 4096
    response = alice_api.post("/api/imports/", {"file": upload(b"[" + b" " * 10_000 + b"]")})

    assert response.status_code == 413
    assert response.json() == {
        "code": "too_large",
        "detail": "The file is 9.8 KB; imports are limited to 4.0 KB.",
    }


def test_a_declared_length_over_the_limit_is_refused_before_the_body_is_read(
    alice_api: Client,
) -> None:
    # The body is a few bytes; the test client would fail any attempt to read the gigabyte
    # the request claims.
    response = alice_api.post(
        "/api/imports/",
        data=b"--B--\r\n",
        content_type="multipart/form-data; boundary=B",
        CONTENT_LENGTH=str(1024**3),
    )

    assert response.status_code == 413
    assert response.json()["detail"] == "The upload is 1.0 GB; imports are limited to 512.0 MB."


def test_it_needs_a_signed_in_user(db: Any) -> None:
    response = Client().post("/api/imports/", {"file": upload(chatgpt_zip(chatgpt_branched()))})

    assert response.status_code == 401
    assert not Conversation.objects.exists()


def test_a_session_needs_its_csrf_token(alice: Any) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)

    response = client.post("/api/imports/", {"file": upload(chatgpt_zip(chatgpt_branched()))})

    assert response.status_code == 403
    assert not Conversation.objects.exists()


def test_imported_conversations_are_the_importers_only_and_searchable(
    alice: Any, alice_api: Client, charlie_api: Client
) -> None:
    alice_api.post("/api/imports/", {"file": upload(as_json([claude_conversation()]), "c.json")})
    chat = Conversation.objects.get(owner=alice)

    found = alice_api.get("/api/conversations/?q=Porto").json()
    assert [c["id"] for c in found["results"]] == [str(chat.pk)]
    assert alice_api.get("/api/conversations/?q=nowhere").json()["results"] == []
    assert charlie_api.get(f"/api/conversations/{chat.pk}/").status_code == 404
    assert charlie_api.get("/api/conversations/?q=Porto").json()["results"] == []


@pytest.fixture
def charlie_api(charlie: Any) -> Client:
    from tests.imports.helpers import api_client

    return api_client(charlie)


def test_imports_an_hour_are_limited_per_user(
    settings: Any, alice: Any, alice_api: Client, bob_api: Client
) -> None:
    settings.CHAT_IMPORTS_PER_HOUR = 2
    files = [as_json([claude_conversation(str(n))]) for n in range(3)]
    first = alice_api.post("/api/imports/", {"file": upload(files[0], "c.json")})
    refused_one = alice_api.post("/api/imports/", {"file": upload(b"not json", "c.json")})
    assert (first.status_code, refused_one.status_code) == (201, 400), "both count"

    over = alice_api.post("/api/imports/", {"file": upload(files[2], "c.json")})

    assert over.status_code == 429
    assert over.json()["code"] == "too_many_imports"
    assert 3000 < int(over["Retry-After"]) <= 3600
    assert Conversation.objects.filter(owner=alice).count() == 1, "nothing of it was read"
    assert bob_api.post("/api/imports/", {"file": upload(files[2], "c.json")}).status_code == 201

"""The REST API, its per-conversation exports, API tokens, and renaming/deleting from the chat
page. export.jsonl has tests of its own (test_export_jsonl.py, test_export_memory.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from conversations.api.serializers import message_data
from conversations.models import ApiToken, Conversation, Message
from conversations.services.tokens import api_token_create, key_hash
from tests.support.history import add_exchange

TIMESTAMPS = (
    "created_at",
    "first_token_at",
    "finished_at",
    "cancel_requested_at",
    "cancel_confirmed_at",
)


def urls(conversation_id: Any) -> dict[str, str]:
    detail = reverse("api-conversation-detail", args=[conversation_id])
    export = reverse("api-conversation-export", args=[conversation_id])
    return {
        "detail": detail,
        "export json": f"{export}?format=json",
        "export markdown": f"{export}?format=markdown",
        "export txt": f"{export}?format=txt",
    }


def parse_time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


# --- list ----------------------------------------------------------------------------------------


def test_it_lists_alice_conversations_newest_first_and_paginated(api: Client, alice: Any) -> None:
    conversations = [Conversation.objects.create(owner=alice, title=f"chat {i}") for i in range(23)]
    base = timezone.now()
    for i, c in enumerate(conversations):
        Conversation.objects.filter(pk=c.pk).update(updated_at=base - timedelta(minutes=i))
    add_exchange(conversations[0], "hello")

    first = api.get(reverse("api-conversation-list")).json()

    assert first["count"] == 23
    assert [c["title"] for c in first["results"]] == [f"chat {i}" for i in range(20)]
    assert first["results"][0]["message_count"] == 2
    assert first["results"][0]["owner"] == "alice"
    assert first["results"][1]["message_count"] == 0
    second = api.get(first["next"]).json()
    assert [c["title"] for c in second["results"]] == ["chat 20", "chat 21", "chat 22"]
    assert second["next"] is None


def test_it_searches_titles_and_message_text(api: Client, alice: Any) -> None:
    by_title = Conversation.objects.create(owner=alice, title="Sourdough starter")
    by_text = Conversation.objects.create(owner=alice, title="Kitchen")
    add_exchange(by_text, "How do I feed a SOURDOUGH culture?")
    add_exchange(by_text, "and another sourdough question")  # two hits, still one row
    Conversation.objects.create(owner=alice, title="Unrelated")

    found = api.get(reverse("api-conversation-list"), {"q": "sourdough"}).json()

    assert sorted(c["id"] for c in found["results"]) == sorted([str(by_title.pk), str(by_text.pk)])


def test_it_filters_by_last_activity(api: Client, alice: Any) -> None:
    old = Conversation.objects.create(owner=alice, title="old")
    new = Conversation.objects.create(owner=alice, title="new")
    Conversation.objects.filter(pk=old.pk).update(updated_at=datetime(2025, 1, 10, tzinfo=UTC))
    Conversation.objects.filter(pk=new.pk).update(updated_at=datetime(2025, 3, 10, tzinfo=UTC))

    def titles(**params: str) -> list[str]:
        response = api.get(reverse("api-conversation-list"), params)
        assert response.status_code == 200, response.content
        return [c["title"] for c in response.json()["results"]]

    assert titles(since="2025-02-01") == ["new"]
    assert titles(until="2025-02-01T00:00:00Z") == ["old"]
    assert titles(since="2025-01-10T00:00:00Z", until="2025-03-10T00:00:00Z") == ["old"]
    assert titles() == ["new", "old"]


def test_it_rejects_a_malformed_date(api: Client) -> None:
    response = api.get(reverse("api-conversation-list"), {"since": "last tuesday"})
    assert response.status_code == 400
    assert "since" in response.json()


# --- detail and exports --------------------------------------------------------------------------


def test_it_shows_a_conversation_with_its_messages(api: Client, history: Conversation) -> None:
    data = api.get(reverse("api-conversation-detail", args=[history.pk])).json()

    assert data["id"] == str(history.pk)
    assert data["title"] == "Alice's chat"
    messages = list(history.messages.all())
    # Written as a plain list (no branch yet): every message is on the branch shown.
    assert data["messages"] == [
        {**message_data(m), "version": [1, 1, None, None], "is_current": True} for m in messages
    ]
    assert data["current_message"] is None
    stopped = data["messages"][3]
    assert stopped["status"] == "cancelled"
    assert stopped["cancelled_by"] == "alice"
    assert stopped["cancel_latency_ms"] == 12.0
    assert stopped["completion_tokens"] == 3
    assert stopped["ttft_ms"] == pytest.approx(150)
    assert stopped["tokens_per_second"] == pytest.approx(3 / 1.85, abs=0.01)
    assert data["messages"][5]["error"] == "engine crashed"


def test_it_round_trips_the_json_export(api: Client, history: Conversation) -> None:
    response = api.get(reverse("api-conversation-export", args=[history.pk]), {"format": "json"})

    assert response["Content-Type"] == "application/json"
    assert response["Content-Disposition"] == 'attachment; filename="alices-chat.json"'
    exported = json.loads(response.content)
    history.refresh_from_db()
    assert exported["id"] == str(history.pk)
    assert exported["title"] == history.title
    assert parse_time(exported["updated_at"]) == history.updated_at
    rows = list(history.messages.all())
    assert len(exported["messages"]) == len(rows) == 6
    for data, row in zip(exported["messages"], rows, strict=True):
        for field in TIMESTAMPS:
            assert parse_time(data.pop(field)) == getattr(row, field), field
        # Where it stands in the conversation's tree, worked out for the export.
        assert (data.pop("version"), data.pop("is_current")) == ([1, 1, None, None], True)
        assert data.pop("parent") == row.parent_id
        assert data.pop("attachments") == []  # tests/attachments export some
        assert data.pop("feedback") is None  # not rated (tests/api/test_feedback_api.py)
        for field, value in data.items():
            assert value == getattr(row, field), field


def test_it_exports_markdown_with_roles_and_stopped_and_failed_replies(
    api: Client, history: Conversation
) -> None:
    response = api.get(
        reverse("api-conversation-export", args=[history.pk]), {"format": "markdown"}
    )

    assert response["Content-Type"] == "text/markdown; charset=utf-8"
    assert response["Content-Disposition"] == 'attachment; filename="alices-chat.md"'
    text = response.content.decode()
    assert text.startswith("# Alice's chat\n")
    assert text.count("## User") == 3
    assert text.count("## Assistant") == 3
    assert "What is a socket?" in text
    assert "> **Cancelled:** Stopped by alice after 3 tokens (engine confirmed in 12 ms)." in text
    assert "> **Error:** Failed: engine crashed" in text


def test_it_exports_plain_text(api: Client, history: Conversation) -> None:
    response = api.get(reverse("api-conversation-export", args=[history.pk]), {"format": "txt"})

    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response["Content-Disposition"] == 'attachment; filename="alices-chat.txt"'
    text = response.content.decode()
    assert "[user]" in text and "[assistant]" in text
    assert "[Stopped by alice after 3 tokens (engine confirmed in 12 ms).]" in text


def test_it_refuses_an_unknown_export_format(api: Client, history: Conversation) -> None:
    response = api.get(reverse("api-conversation-export", args=[history.pk]), {"format": "pdf"})
    assert response.status_code == 400


def test_it_names_an_untitled_export_and_keeps_non_ascii_titles(api: Client, alice: Any) -> None:
    untitled = Conversation.objects.create(owner=alice)
    accented = Conversation.objects.create(owner=alice, title="Café déjà vu")

    def disposition(c: Conversation) -> str:
        url = reverse("api-conversation-export", args=[c.pk])
        return str(api.get(url, {"format": "txt"})["Content-Disposition"])

    assert disposition(untitled) == 'attachment; filename="new-conversation.txt"'
    assert disposition(accented) == 'attachment; filename="cafe-deja-vu.txt"'


# --- delete --------------------------------------------------------------------------------------


def test_it_lets_alice_delete_her_conversation(api: Client, history: Conversation) -> None:
    response = api.delete(reverse("api-conversation-detail", args=[history.pk]))

    assert response.status_code == 204
    assert not Conversation.objects.filter(pk=history.pk).exists()
    assert not Message.objects.filter(conversation_id=history.pk).exists()


def test_it_requires_csrf_to_delete_with_a_session(alice: Any, history: Conversation) -> None:
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(alice)
    url = reverse("api-conversation-detail", args=[history.pk])

    assert browser.delete(url).status_code == 403
    assert Conversation.objects.filter(pk=history.pk).exists()

    browser.get(reverse("api-tokens"))  # any page with a form sets the CSRF cookie
    csrf = browser.cookies["csrftoken"].value
    assert browser.delete(url, headers={"X-CSRFToken": csrf}).status_code == 204
    assert not Conversation.objects.filter(pk=history.pk).exists()


def test_it_reads_with_the_browser_session(alice: Any, history: Conversation) -> None:
    browser = Client()
    browser.force_login(alice)
    response = browser.get(reverse("api-conversation-detail", args=[history.pk]))
    assert response.status_code == 200
    assert response.json()["id"] == str(history.pk)


# --- refusals ------------------------------------------------------------------------------------


@pytest.mark.parametrize("endpoint", list(urls("00000000-0000-0000-0000-000000000000")))
def test_it_refuses_charlie_alice_conversation(
    charlie_api: Client, history: Conversation, endpoint: str
) -> None:
    assert charlie_api.get(urls(history.pk)[endpoint]).status_code == 404


def test_it_refuses_charlie_deleting_alice_conversation(
    charlie_api: Client, history: Conversation
) -> None:
    response = charlie_api.delete(reverse("api-conversation-detail", args=[history.pk]))
    assert response.status_code == 404
    assert Conversation.objects.filter(pk=history.pk).exists()


def test_it_leaves_alice_conversations_out_of_charlie_lists_and_exports(
    charlie_api: Client, history: Conversation
) -> None:
    assert charlie_api.get(reverse("api-conversation-list")).json()["count"] == 0
    assert (
        charlie_api.get(reverse("api-conversation-list"), {"q": "socket"}).json()["results"] == []
    )
    export = charlie_api.get(reverse("api-export-jsonl"))
    assert export.status_code == 200 and export.content == b""


@pytest.mark.parametrize(
    "method, name, with_id",
    [
        ("get", "api-conversation-list", False),
        ("get", "api-conversation-detail", True),
        ("delete", "api-conversation-detail", True),
        ("get", "api-conversation-export", True),
        ("get", "api-export-jsonl", False),
    ],
)
def test_it_answers_401_without_credentials(
    history: Conversation, method: str, name: str, with_id: bool
) -> None:
    url = reverse(name, args=[history.pk] if with_id else [])
    response = getattr(Client(), method)(url)
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert Conversation.objects.filter(pk=history.pk).exists()


def test_it_answers_401_to_an_unknown_token(history: Conversation) -> None:
    client = Client(headers={"Authorization": "Bearer cs_not-a-real-token"})
    assert client.get(reverse("api-conversation-list")).status_code == 401


# --- tokens --------------------------------------------------------------------------------------


def test_it_creates_a_token_shown_once_and_stored_hashed(alice: Any, history: Conversation) -> None:
    browser = Client()
    browser.force_login(alice)

    created = browser.post(reverse("api-tokens"), {"name": "backup script"}, follow=True)

    assert created.redirect_chain == [(reverse("api-tokens"), 302)], "POST-redirect-GET"
    assert created.status_code == 200
    assert "no-store" in created["Cache-Control"]
    key = created.context["key"]
    assert key.startswith("cs_") and key in created.content.decode()
    token = ApiToken.objects.get(user=alice, name="backup script")
    assert token.key_hash == key_hash(key) != key
    assert not ApiToken.objects.filter(key_hash=key).exists()
    page = browser.get(reverse("api-tokens")).content.decode()
    assert "backup script" in page and token.prefix in page
    assert key not in page

    api = Client(headers={"Authorization": f"Bearer {key}"})
    assert api.get(reverse("api-conversation-list")).json()["count"] == 1
    token.refresh_from_db()
    assert token.last_used_at is not None


def test_it_requires_a_token_name(alice: Any) -> None:
    browser = Client()
    browser.force_login(alice)
    response = browser.post(reverse("api-tokens"), {"name": "  "})
    assert response.status_code == 400
    assert not ApiToken.objects.exists()


def test_it_makes_a_token_with_its_recording_and_shows_it(alice: Any, settings: Any) -> None:
    """Whether the gateway keeps a token's calls: chosen when it is made (a form without the
    field: the server's default), and shown with the others."""
    settings.CHAT_GATEWAY_RECORD = False
    browser = Client()
    browser.force_login(alice)

    browser.post(reverse("api-tokens"), {"name": "private", "recording": "none"})
    browser.post(reverse("api-tokens"), {"name": "notes", "recording": "all"})
    browser.post(reverse("api-tokens"), {"name": "script"})
    refused = browser.post(reverse("api-tokens"), {"name": "odd", "recording": "some"})

    assert refused.status_code == 400 and "Choose which" in refused.content.decode()
    recordings = dict(ApiToken.objects.values_list("name", "recording"))
    assert recordings == {"private": "none", "notes": "all", "script": "default"}
    page = browser.get(reverse("api-tokens")).content.decode()
    assert page.count('<td class="token-recording">none</td>') == 1
    assert page.count('<td class="token-recording">every call</td>') == 1
    assert page.count('<td class="token-recording">none (as the server)</td>') == 1
    assert "As the server does (now: none)" in page


def test_it_stops_a_revoked_token(alice: Any, api: Client, history: Conversation) -> None:
    assert api.get(reverse("api-conversation-list")).status_code == 200
    token = ApiToken.objects.get(user=alice)
    browser = Client()
    browser.force_login(alice)

    response = browser.post(reverse("api-token-revoke", args=[token.pk]))

    assert response.status_code == 302
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert api.get(reverse("api-conversation-list")).status_code == 401
    assert "revoked" in browser.get(reverse("api-tokens")).content.decode()


def test_it_stops_the_token_of_a_disabled_user(alice: Any, api: Client) -> None:
    alice.is_active = False
    alice.save()
    assert api.get(reverse("api-conversation-list")).status_code == 401


def test_it_refuses_charlie_revoking_alice_token(alice: Any, charlie: Any) -> None:
    token, _ = api_token_create(user=alice, name="alice's")
    browser = Client()
    browser.force_login(charlie)

    assert browser.post(reverse("api-token-revoke", args=[token.pk])).status_code == 404
    assert browser.get(reverse("api-tokens")).content.decode().count("alice&#x27;s") == 0
    token.refresh_from_db()
    assert token.revoked_at is None


def test_it_sends_anonymous_visitors_of_the_token_page_to_login(db: Any) -> None:
    response = Client().get(reverse("api-tokens"))
    assert response.status_code == 302
    assert reverse("login") in response["Location"]


# --- the API docs --------------------------------------------------------------------------------


def test_it_serves_the_schema_and_docs_without_any_cdn(alice: Any) -> None:
    reader = Client()
    reader.force_login(alice)
    schema = reader.get(reverse("api-schema"), {"format": "json"})
    assert schema["Content-Type"].startswith("application/vnd.oai.openapi+json")
    assert schema.status_code == 200
    paths = json.loads(schema.content)["paths"]
    assert set(paths) == {
        "/api/conversations/",
        "/api/conversations/{conversation_id}/",
        "/api/conversations/{conversation_id}/export",
        "/api/conversations/{conversation_id}/shares/",
        "/api/conversations/{conversation_id}/shares/{share_id}/",
        "/api/export.jsonl",
        "/api/feedback.jsonl",
        "/api/imports/",
        "/api/models/",
        "/api/prompts/",
        "/api/prompts/{prompt_id}/",
        "/v1/chat/completions",  # the gateway (conversations/gateway/schema.py)
        "/v1/responses",
        "/v1/models",
        "/v1/models/{model}",
    }

    docs = reader.get(reverse("api-docs"))
    assert docs.status_code == 200
    html = docs.content.decode()
    assert "swagger-ui" in html
    assert "drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in html
    assert "cdn" not in html.lower() and "https://" not in html


# --- renaming and deleting from the chat page ----------------------------------------------------


def test_it_renames_from_the_chat_page(alice: Any, conversation: Conversation) -> None:
    browser = Client()
    browser.force_login(alice)

    response = browser.post(
        reverse("conversation-rename", args=[conversation.pk]), {"title": "  Trip plans  "}
    )

    assert response.status_code == 302
    conversation.refresh_from_db()
    assert conversation.title == "Trip plans"
    assert conversation.title_is_custom


def test_renaming_keeps_the_conversations_date(alice: Any, conversation: Conversation) -> None:
    last_week = timezone.now() - timedelta(days=7)
    Conversation.objects.filter(pk=conversation.pk).update(updated_at=last_week)
    browser = Client()
    browser.force_login(alice)

    browser.post(reverse("conversation-rename", args=[conversation.pk]), {"title": "Old trip"})

    conversation.refresh_from_db()
    assert conversation.title == "Old trip" and conversation.updated_at == last_week


def test_it_ignores_a_blank_new_title(alice: Any, conversation: Conversation) -> None:
    browser = Client()
    browser.force_login(alice)
    browser.post(reverse("conversation-rename", args=[conversation.pk]), {"title": "   "})
    conversation.refresh_from_db()
    assert conversation.title == "Alice's chat"
    assert not conversation.title_is_custom


def test_it_deletes_from_the_chat_page(alice: Any, history: Conversation) -> None:
    browser = Client()
    browser.force_login(alice)

    response = browser.post(reverse("conversation-delete", args=[history.pk]))

    assert response.status_code == 302
    assert response["Location"] == reverse("conversation-list")
    assert not Conversation.objects.filter(pk=history.pk).exists()
    assert not Message.objects.filter(conversation_id=history.pk).exists()


@pytest.mark.parametrize("name", ["conversation-rename", "conversation-delete"])
def test_it_refuses_charlie_renaming_or_deleting(
    charlie: Any, conversation: Conversation, name: str
) -> None:
    browser = Client()
    browser.force_login(charlie)

    response = browser.post(reverse(name, args=[conversation.pk]), {"title": "mine now"})

    assert response.status_code == 404
    conversation.refresh_from_db()
    assert conversation.title == "Alice's chat"


@pytest.mark.parametrize("name", ["conversation-rename", "conversation-delete"])
def test_it_refuses_get_for_rename_and_delete(
    alice: Any, conversation: Conversation, name: str
) -> None:
    browser = Client()
    browser.force_login(alice)
    assert browser.get(reverse(name, args=[conversation.pk])).status_code == 405
    assert Conversation.objects.filter(pk=conversation.pk).exists()

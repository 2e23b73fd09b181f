"""The settings page's Import form and the page that reports what was imported."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from conversations.imports import FORMATS
from conversations.models import Conversation
from tests.imports.helpers import upload
from tests.imports.sources import as_json, chatgpt_branched, chatgpt_zip, openwebui_chat

pytestmark = pytest.mark.django_db


@pytest.fixture
def page(alice: Any) -> Client:
    client = Client()
    client.force_login(alice)
    return client


def test_the_settings_page_offers_every_format_beside_the_export(page: Client) -> None:
    html = page.get("/settings/tokens/").content.decode()

    form = html[html.index('<form id="import-form"') :]
    assert 'action="/settings/import/"' in form and 'enctype="multipart/form-data"' in form
    offered = re.findall(r'<option value="(\w*)"', form[: form.index("</form>")])
    assert offered == ["", *FORMATS], "the template lists conversations.imports.FORMATS"
    assert html.index('id="export-all"') < html.index('id="import-form"')


def test_an_import_shows_what_was_imported_with_links_and_what_was_skipped(
    alice: Any, page: Client
) -> None:
    response = page.post(
        "/settings/import/", {"file": upload(chatgpt_zip(chatgpt_branched())), "format": ""}
    )

    assert response.status_code == 200
    html = response.content.decode()
    chat = Conversation.objects.get(owner=alice)
    assert "Imported 1 conversation from ChatGPT; 1 note below." in html
    assert f'<a href="/conversations/{chat.pk}/">Arithmetic</a> (6 messages)' in html
    assert "2 messages" in html and "tool calls and tool results are not imported" in html


def test_keep_partial_from_the_checkbox(alice: Any, page: Client) -> None:
    bad = openwebui_chat("bad") | {"chat": "nope", "title": "Bad"}
    data = as_json([openwebui_chat(), bad])

    refused = page.post("/settings/import/", {"file": upload(data, "chats.json")})
    assert refused.status_code == 400
    assert "Conversation 2 of the file (Bad)" in refused.content.decode()
    assert not Conversation.objects.exists()

    kept = page.post(
        "/settings/import/",
        {"file": upload(data, "chats.json"), "format": "openwebui", "keep_partial": "on"},
    )
    assert kept.status_code == 200
    assert "Imported 1 conversation from Open WebUI" in kept.content.decode()
    assert "Its `chat` is not a JSON object." in kept.content.decode()


def test_a_file_that_cannot_be_imported_says_why(page: Client, settings: Any) -> None:
    response = page.post("/settings/import/", {"file": upload(b"<html>nope</html>", "x.json")})
    assert response.status_code == 400
    assert "The file is not an export chatsite reads" in response.content.decode()

    settings.CHAT_IMPORT_MAX_BYTES = 1024
    big = page.post("/settings/import/", {"file": upload(b" " * 100_000, "x.json")})
    assert big.status_code == 413
    assert re.search(
        r"The upload is 9\d.\d KB; imports are limited to 1.0 KB.", big.content.decode()
    )
    assert not Conversation.objects.exists()


def test_it_needs_a_signed_in_user_and_the_csrf_token(alice: Any) -> None:
    form = {"file": upload(chatgpt_zip(chatgpt_branched()))}
    anonymous = Client().post("/settings/import/", form)
    assert anonymous.status_code == 302 and "/login/" in anonymous["Location"]

    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    assert client.post("/settings/import/", form).status_code == 403
    assert client.get("/settings/import/").status_code == 405
    assert not Conversation.objects.exists()


def test_imported_conversations_are_grouped_by_their_own_dates(alice: Any, page: Client) -> None:
    page.post("/settings/import/", {"file": upload(chatgpt_zip(chatgpt_branched()))})

    html = page.get("/").content.decode()

    sidebar = html[html.index('id="conversation-list"') :]
    # 2024-03-01: a year ago or more, so filed under its year.
    assert sidebar.index(">2024<") < sidebar.index("Arithmetic")


def test_the_page_says_when_the_hours_imports_are_used_up(
    settings: Any, alice: Any, page: Client
) -> None:
    settings.CHAT_IMPORTS_PER_HOUR = 1
    form = {"file": upload(chatgpt_zip(chatgpt_branched())), "format": ""}
    assert page.post("/settings/import/", form).status_code == 200

    again = page.post(
        "/settings/import/", {"file": upload(as_json([openwebui_chat()])), "format": ""}
    )

    assert again.status_code == 429 and "Retry-After" in again
    assert "imported too many files this hour" in again.content.decode()
    assert Conversation.objects.filter(owner=alice).count() == 1

"""Text PostgreSQL cannot store (NUL) is refused with a readable answer, never a server error."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from conversations.models import ApiToken, Conversation, Message

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def browser(alice: Any) -> Client:
    client = Client()
    client.force_login(alice)
    return client


def test_a_title_with_a_nul_is_refused_and_the_old_title_kept(
    browser: Client, conversation: Conversation
) -> None:
    url = reverse("conversation-rename", args=[conversation.pk])
    response = browser.post(url, {"title": "evil\x00title"})
    assert response.status_code == 400
    assert b"Null characters are not allowed" in response.content
    conversation.refresh_from_db()
    assert conversation.title == "Alice's chat"


def test_a_token_name_with_a_nul_is_refused_on_the_page(browser: Client) -> None:
    response = browser.post(reverse("api-tokens"), {"name": "script\x00"})
    assert response.status_code == 400
    assert b"Null characters are not allowed" in response.content
    assert not ApiToken.objects.exists()


@pytest.mark.parametrize("parameter", ["status", "engine"])
def test_an_admin_filter_with_a_nul_finds_nothing(
    parameter: str, conversation: Conversation
) -> None:
    Message.objects.create(conversation=conversation, role="assistant", engine="scripted")
    admin = Client()
    admin.force_login(get_user_model().objects.create_superuser("root", "root@example.com", "pw"))
    url = reverse("admin:conversations_conversation_changelist")
    response = admin.get(
        url, {parameter: {"status": "complete", "engine": "scripted"}[parameter] + "\x00"}
    )
    assert response.status_code == 200
    listed = "Alice&#x27;s chat"  # as the page escapes it
    assert listed not in response.content.decode()
    assert listed in admin.get(url).content.decode(), "found without the filter"

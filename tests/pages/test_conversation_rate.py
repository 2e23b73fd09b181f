"""Starting conversations is limited per user and minute, on the page."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from conversations.models import Conversation

pytestmark = [pytest.mark.django_db]


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_it_refuses_a_new_conversation_over_the_rate(
    users: dict[str, Any], alice: Any, settings: Any
) -> None:
    settings.CHAT_CONVERSATIONS_PER_MINUTE = 2
    client = client_for(alice)
    for _ in range(2):
        assert client.post(reverse("conversation-new")).status_code == 302

    response = client.post(reverse("conversation-new"))

    assert response.status_code == 429
    assert 0 < int(response["Retry-After"]) <= 60
    assert "You can start 2 conversations a minute" in response.content.decode()
    assert Conversation.objects.filter(owner=alice).count() == 2
    # The limit is alice's alone: bob still starts one.
    assert client_for(users["bob"]).post(reverse("conversation-new")).status_code == 302


def test_deleting_conversations_does_not_reset_the_rate(alice: Any, settings: Any) -> None:
    settings.CHAT_CONVERSATIONS_PER_MINUTE = 2
    client = client_for(alice)
    for _ in range(2):
        client.post(reverse("conversation-new"))
    for conversation in Conversation.objects.filter(owner=alice):
        client.post(reverse("conversation-delete", args=[conversation.pk]))
    assert not Conversation.objects.filter(owner=alice).exists()

    assert client.post(reverse("conversation-new")).status_code == 429

"""Starting conversations is limited per user and minute, on the page."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from conversations.models import Conversation, Message

pytestmark = [pytest.mark.django_db]


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def start(client: Client) -> Any:
    """Start a conversation and use it (an unused one would be offered again, not counted)."""
    response = client.post(reverse("conversation-new"))
    if response.status_code == 302:
        conversation = Conversation.objects.get(pk=response.url.split("/")[-2])
        Message.objects.create(conversation=conversation, role="user", content="hi")
    return response


def test_it_refuses_a_new_conversation_over_the_rate(
    users: dict[str, Any], alice: Any, settings: Any
) -> None:
    settings.CHAT_CONVERSATIONS_PER_MINUTE = 2
    client = client_for(alice)
    for _ in range(2):
        assert start(client).status_code == 302

    response = start(client)

    assert response.status_code == 429
    assert 0 < int(response["Retry-After"]) <= 60
    assert "You can start 2 conversations a minute" in response.content.decode()
    assert Conversation.objects.filter(owner=alice).count() == 2
    # The limit is alice's alone: bob still starts one.
    assert start(client_for(users["bob"])).status_code == 302


def test_deleting_conversations_does_not_reset_the_rate(alice: Any, settings: Any) -> None:
    settings.CHAT_CONVERSATIONS_PER_MINUTE = 2
    client = client_for(alice)
    for _ in range(2):
        start(client)
    for conversation in Conversation.objects.filter(owner=alice):
        client.post(reverse("conversation-delete", args=[conversation.pk]))
    assert not Conversation.objects.filter(owner=alice).exists()

    assert start(client).status_code == 429

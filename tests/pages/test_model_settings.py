"""The page's model picker and settings panel, and models managed in the admin."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from conversations.models import ChatModel, Conversation

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice_client(alice: Any) -> Client:
    client = Client()
    client.force_login(alice)
    return client


def settings_url(conversation: Conversation) -> str:
    return reverse("conversation-settings", args=[conversation.pk])


def test_the_picker_offers_your_models_with_the_conversation_s_selected(
    alice_client: Client, conversation: Conversation, two_models: Any
) -> None:
    conversation.model_slug = "careful"
    conversation.save()
    page = alice_client.get(conversation.get_absolute_url()).content.decode()
    assert '<option value="careful" selected>Careful' in page
    assert '<option value="quick">Quick' in page
    assert "Internal" not in page, "a model of a group alice is not in"


def test_a_new_conversation_shows_the_default_model(
    alice_client: Client, conversation: Conversation, two_models: Any
) -> None:
    page = alice_client.get(conversation.get_absolute_url()).content.decode()
    assert '<option value="quick" selected>Quick' in page
    assert (
        'Model and settings: <span class="settings-model" data-model="quick">Quick</span>' in page
    )


def test_the_settings_panel_saves_within_the_model_s_bounds(
    alice_client: Client, conversation: Conversation, two_models: Any
) -> None:
    response = alice_client.post(
        settings_url(conversation),
        {
            "model": "careful",
            "system_prompt": "Be terse.\r\nNo lists.",  # as browsers send a textarea's lines
            "temperature": "1.2",
            "max_tokens": "",
        },
    )
    assert response.status_code == 302
    conversation.refresh_from_db()
    assert (conversation.model_slug, conversation.system_prompt) == (
        "careful",
        "Be terse.\nNo lists.",
    )
    assert (conversation.temperature, conversation.max_tokens) == (1.2, None)

    refused = alice_client.post(
        settings_url(conversation), {"model": "quick", "temperature": "1.5", "max_tokens": "500"}
    )
    assert refused.status_code == 400
    page = refused.content.decode()
    assert "Quick takes a temperature from 0 to 1." in page
    assert "Quick writes replies of 1 to 128 tokens." in page
    conversation.refresh_from_db()
    assert (conversation.model_slug, conversation.temperature) == ("careful", 1.2)


def test_nobody_else_can_change_the_settings(
    conversation: Conversation, charlie: Any, two_models: Any
) -> None:
    client = Client()
    client.force_login(charlie)
    response = client.post(settings_url(conversation), {"model": "careful"})
    assert response.status_code == 404
    conversation.refresh_from_db()
    assert conversation.model_slug == ""


@pytest.fixture
def admin(db: Any) -> Client:
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.force_login(user)
    return client


def add_model(client: Client, **fields: Any) -> Any:
    data = {
        "name": "Big",
        "slug": "big",
        "backend": "openai",
        "model_id": "big-1",
        "options": '{"base_url": "http://upstream:8000/v1", "api_key_env": "BIG_KEY"}',
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
    return client.post(reverse("admin:conversations_chatmodel_add"), data)


def test_staff_add_a_model_that_users_can_pick(admin: Client, two_models: Any, alice: Any) -> None:
    response = add_model(admin)
    assert response.status_code == 302, response.content.decode()[:2000]
    row = ChatModel.objects.get(slug="big")
    assert row.options["api_key_env"] == "BIG_KEY", "the key's variable, never the key"
    client = Client()
    client.force_login(alice)
    assert [m["slug"] for m in client.get(reverse("api-model-list")).json()] == [
        "quick",
        "careful",
        "big",
    ]
    changelist = admin.get(reverse("admin:conversations_chatmodel_changelist")).content.decode()
    assert "Declared in the environment" in changelist and "Careful" in changelist


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"slug": "quick"}, "A model declared in CHAT_MODELS has this slug."),
        ({"backend": "gpt9"}, "Select a valid choice. gpt9 is not one of the available choices."),
        ({"max_tokens": 5000}, "Max_tokens must be between 1 and max_tokens_limit."),
        ({"temperature": 3}, "Temperature must be between 0 and max_temperature."),
    ],
)
def test_the_admin_refuses_a_model_that_cannot_work(
    admin: Client, two_models: Any, fields: dict[str, Any], error: str
) -> None:
    response = add_model(admin, **fields)
    assert response.status_code == 200
    assert error in response.content.decode()
    assert not ChatModel.objects.filter(name="Big").exists()

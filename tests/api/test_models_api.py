"""GET /api/models/ and a conversation's model, system prompt and sampling through the API."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse

from conversations.models import Conversation

pytestmark = pytest.mark.django_db


def patch(client: Client, conversation: Conversation, **body: Any) -> Any:
    url = reverse("api-conversation-detail", args=[conversation.pk])
    return client.patch(url, json.dumps(body), content_type="application/json")


def test_it_lists_the_models_you_may_use(api: Client, two_models: Any, alice: Any) -> None:
    response = api.get(reverse("api-model-list"))
    assert response.status_code == 200
    models = response.json()
    assert [m["slug"] for m in models] == ["quick", "careful"], "not the reviewers' model"
    quick = models[0]
    assert quick["name"] == "Quick" and quick["backend"] == "scripted"
    assert quick["status"] in {"ready", "loading", "not_loaded"}
    assert (quick["system_prompt"], quick["temperature"], quick["max_tokens"]) == (
        "Answer quickly.",
        0.2,
        64,
    )
    assert (quick["max_temperature"], quick["max_tokens_limit"]) == (1.0, 128)

    alice.groups.add(Group.objects.create(name="reviewers"))
    slugs = [m["slug"] for m in api.get(reverse("api-model-list")).json()]
    assert slugs == ["quick", "careful", "internal"]


def test_it_needs_a_login(client: Client) -> None:
    assert client.get(reverse("api-model-list")).status_code in {401, 403}


def test_a_conversation_carries_its_model_and_settings(
    api: Client, conversation: Conversation, two_models: Any
) -> None:
    response = patch(
        api,
        conversation,
        model="careful",
        system_prompt="Answer in haiku.",
        temperature=1.5,
        max_tokens=200,
    )
    assert response.status_code == 200, response.content
    detail = response.json()
    assert (detail["model"], detail["system_prompt"]) == ("careful", "Answer in haiku.")
    assert (detail["temperature"], detail["max_tokens"]) == (1.5, 200)
    conversation.refresh_from_db()
    assert (conversation.model_slug, conversation.temperature) == ("careful", 1.5)
    assert api.get(reverse("api-conversation-detail", args=[conversation.pk])).json() == detail

    # null puts a setting back to the model's default; the rest stay.
    detail = patch(api, conversation, system_prompt=None, title="Poems").json()
    assert detail["system_prompt"] is None and detail["max_tokens"] == 200
    assert detail["title"] == "Poems" and detail["title_is_custom"] is True


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"model": "internal"}, "model"),  # not for alice
        ({"model": "nope"}, "model"),
        ({"temperature": 1.5}, "temperature"),  # quick allows at most 1.0
        ({"temperature": -0.1}, "temperature"),
        ({"max_tokens": 129}, "max_tokens"),  # quick allows at most 128
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_tokens": "many"}, "max_tokens"),
        ({"system_prompt": "x" * 8001}, "system_prompt"),
        ({"system_prompt": "nul \x00"}, "system_prompt"),
    ],
)
def test_it_refuses_settings_out_of_the_model_s_bounds(
    api: Client, conversation: Conversation, two_models: Any, body: Any, field: str
) -> None:
    conversation.model_slug = "quick"
    conversation.save()
    response = patch(api, conversation, **body)
    assert response.status_code == 400
    assert field in response.json()
    conversation.refresh_from_db()
    assert (conversation.model_slug, conversation.temperature, conversation.max_tokens) == (
        "quick",
        None,
        None,
    )


def test_another_user_cannot_change_it(
    charlie_api: Client, conversation: Conversation, two_models: Any
) -> None:
    assert patch(charlie_api, conversation, model="careful").status_code == 404
    conversation.refresh_from_db()
    assert conversation.model_slug == ""


def test_put_is_not_offered(api: Client, conversation: Conversation) -> None:
    url = reverse("api-conversation-detail", args=[conversation.pk])
    response = api.put(url, json.dumps({"title": "x"}), content_type="application/json")
    assert response.status_code == 405


def test_exports_show_each_reply_s_model_and_settings(
    api: Client, conversation: Conversation
) -> None:
    conversation.messages.create(role="user", content="Hi")
    conversation.messages.create(
        role="assistant",
        content="Hello",
        engine="scripted",
        model="quick-1",
        model_slug="quick",
        system_prompt="Answer quickly.",
        temperature=0.2,
        max_tokens=64,
    )
    url = reverse("api-conversation-export", args=[conversation.pk])
    reply = api.get(url, {"format": "json"}).json()["messages"][1]
    assert (reply["model_slug"], reply["system_prompt"]) == ("quick", "Answer quickly.")
    assert (reply["temperature"], reply["max_tokens"]) == (0.2, 64)
    assert "quick: scripted/quick-1" in api.get(url, {"format": "markdown"}).content.decode()

"""Problem 4 in the pages, without a browser: replies labelled with the model's name, the
composer's picker saving the model and bringing back the settings panel naming it, the panel
saved in place (htmx) with a confirmation or inline errors, and per-user defaults for new
conversations (the browser's side is test_last_mile_models_browser.py)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from conversations import engines
from conversations.engines import specs
from conversations.generation.replies import Send, Turn, reply_create
from conversations.models import Conversation, Message, Project, UserPreferences
from tests.support.servers import models_server

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def alice_client(alice: Any) -> Client:
    client = Client()
    client.force_login(alice)
    return client


def test_problem_4_a_reply_is_labelled_with_the_model_s_name(
    alice_client: Client, conversation: Conversation, two_models: Any
) -> None:
    plan = reply_create(
        Send(conversation=conversation, turn=Turn(content="Hello"), model_slug="careful")
    )
    reply = Message.objects.get(pk=plan.message_id)
    assert (reply.model_slug, reply.model_name) == ("careful", "Careful")
    Message.objects.filter(pk=reply.pk).update(status="complete", content="Hi.")
    page = alice_client.get(conversation.get_absolute_url()).content.decode()
    assert 'data-model="careful" title="scripted: careful-1">· Careful</span>' in page


def test_problem_4_the_openai_default_is_named_by_the_server_s_model(settings: Any) -> None:
    with models_server() as base_url:
        settings.CHAT_ENGINE = "openai"
        settings.CHAT_OPENAI_BASE_URL = base_url
        settings.CHAT_OPENAI_MODEL = ""
        spec = specs.legacy_spec()
        assert spec.named_by_server and spec.name == "openai"
        engines.start_loading(spec).result(timeout=10)
        assert engines.shown_name(spec) == "up-1"
        settings.CHAT_MODEL_NAME = "Team model"
        named = specs.legacy_spec()
        assert not named.named_by_server and engines.shown_name(named) == "Team model"


def test_problem_4_the_picker_saves_the_model_and_the_summary_follows(
    alice_client: Client, conversation: Conversation, two_models: Any
) -> None:
    url = reverse("conversation-model", args=[conversation.pk])
    response = alice_client.post(url, {"model": "careful"}, **HTMX)
    assert response.status_code == 200
    panel = response.content.decode()
    assert '<span class="settings-model" data-model="careful">Careful</span>' in panel
    assert 'name="model" value="careful"' in panel, "the panel saves for the model picked"
    assert 'placeholder="Think it through."' in panel, "with that model's defaults"
    conversation.refresh_from_db()
    assert conversation.model_slug == "careful"
    page = alice_client.get(conversation.get_absolute_url()).content.decode()
    assert page.count('name="model"') == 2, "the picker, and the panel's hidden copy of it"
    assert '<select name="model"' in page and page.count('<select name="model"') == 1

    refused = alice_client.post(url, {"model": "internal"}, **HTMX).content.decode()
    assert "is not available to you" in refused and 'role="alert"' in refused
    conversation.refresh_from_db()
    assert conversation.model_slug == "careful"


def test_problem_4_settings_save_in_place_with_a_confirmation(
    alice_client: Client, conversation: Conversation, two_models: Any
) -> None:
    url = reverse("conversation-settings", args=[conversation.pk])
    saved = alice_client.post(
        url, {"model": "quick", "system_prompt": "Be brief.", "temperature": "0.5"}, **HTMX
    )
    assert saved.status_code == 200
    panel = saved.content.decode()
    assert panel.lstrip().startswith("<details") or 'id="chat-settings"' in panel
    assert '<span class="settings-saved" role="status">Saved</span>' in panel
    assert "<html" not in panel, "the panel alone, swapped in place"
    conversation.refresh_from_db()
    assert (conversation.system_prompt, conversation.temperature) == ("Be brief.", 0.5)


def test_problem_4_settings_errors_are_inline_and_nothing_is_saved(
    alice_client: Client, conversation: Conversation, two_models: Any
) -> None:
    url = reverse("conversation-settings", args=[conversation.pk])
    refused = alice_client.post(
        url, {"model": "quick", "temperature": "1.5", "max_tokens": "500"}, **HTMX
    )
    panel = refused.content.decode()
    assert 'aria-invalid="true" aria-describedby="settings-temperature-error"' in panel
    assert (
        '<p id="settings-temperature-error" class="field-error">'
        "Quick takes a temperature from 0 to 1.</p>"
    ) in panel
    assert 'aria-describedby="settings-max_tokens-error"' in panel
    assert 'role="status"></span>' in panel, "no confirmation"
    conversation.refresh_from_db()
    assert conversation.temperature is None


def test_nobody_else_can_pick_a_conversation_s_model(
    conversation: Conversation, charlie: Any, two_models: Any
) -> None:
    client = Client()
    client.force_login(charlie)
    url = reverse("conversation-model", args=[conversation.pk])
    assert client.post(url, {"model": "careful"}, **HTMX).status_code == 404
    conversation.refresh_from_db()
    assert conversation.model_slug == ""


def test_problem_4_per_user_defaults_start_new_conversations(
    alice_client: Client, alice: Any, two_models: Any
) -> None:
    page = alice_client.get(reverse("account")).content.decode()
    assert "Defaults for new conversations" in page
    saved = alice_client.post(
        reverse("account-defaults"),
        {"default_model": "careful", "default_instructions": "Answer in French.\r\nBriefly."},
        **HTMX,
    ).content.decode()
    assert '<span class="defaults-saved" role="status">Saved</span>' in saved
    assert "<html" not in saved
    preferences = UserPreferences.objects.get(user=alice)
    assert (preferences.default_model_slug, preferences.default_instructions) == (
        "careful",
        "Answer in French.\nBriefly.",
    )

    alice_client.post(reverse("conversation-new"))
    new = Conversation.objects.filter(owner=alice).latest("created_at")
    assert (new.model_slug, new.system_prompt) == ("careful", "Answer in French.\nBriefly.")

    # In a project, the project's own instructions come first; the user's model fills the gap.
    project = Project.objects.create(owner=alice, name="Thesis", system_prompt="Cite sources.")
    alice_client.post(reverse("project-conversation-new", args=[project.pk]))
    inside = Conversation.objects.filter(owner=alice, project=project).get()
    assert (inside.model_slug, inside.system_prompt) == ("careful", "Cite sources.")


def test_problem_4_defaults_errors_are_inline(
    alice_client: Client, alice: Any, two_models: Any
) -> None:
    refused = alice_client.post(
        reverse("account-defaults"),
        {
            "default_model": "internal",
            "default_instructions": "x" * (specs.MAX_SYSTEM_PROMPT_CHARS + 1),
        },
        **HTMX,
    ).content.decode()
    assert 'aria-invalid="true" aria-describedby="defaults-model-error"' in refused
    assert "This model is not available to you." in refused
    assert "Instructions are limited to 8000 characters." in refused
    assert not UserPreferences.objects.filter(user=alice).exists()

    # Without JavaScript: the account page comes back with the errors.
    page = alice_client.post(reverse("account-defaults"), {"default_model": "internal"})
    assert (
        page.status_code == 400 and "This model is not available to you." in page.content.decode()
    )
    kept = alice_client.post(reverse("account-defaults"), {"default_model": "quick"})
    assert kept.status_code == 302 and kept["Location"] == reverse("account")


def test_problem_4_new_offers_an_unused_conversation_with_the_defaults(
    alice_client: Client, alice: Any, two_models: Any
) -> None:
    alice_client.post(reverse("conversation-new"))  # made before the defaults were set
    Conversation.objects.filter(owner=alice).update(model_slug="quick")  # and a model picked
    UserPreferences.objects.create(
        user=alice, default_model_slug="careful", default_instructions="Be kind."
    )
    alice_client.post(reverse("conversation-new"))
    offered = Conversation.objects.get(owner=alice)
    assert (offered.model_slug, offered.system_prompt) == ("careful", "Be kind.")


def test_a_default_model_taken_away_is_not_used(
    alice_client: Client, alice: Any, two_models: Any
) -> None:
    UserPreferences.objects.create(user=alice, default_model_slug="gone")
    alice_client.post(reverse("conversation-new"))
    assert Conversation.objects.get(owner=alice).model_slug == ""


def test_signed_out_visitors_cannot_save_defaults_or_pick_models(
    conversation: Conversation, two_models: Any
) -> None:
    anonymous = Client()
    for url in (
        reverse("account-defaults"),
        reverse("conversation-model", args=[conversation.pk]),
    ):
        response = anonymous.post(url, {"default_model": "careful", "model": "careful"})
        assert response.status_code == 302 and "/login/" in response["Location"]
    assert not UserPreferences.objects.exists()
    conversation.refresh_from_db()
    assert conversation.model_slug == ""

"""Filters in the sidebar's search and the API's ?q= (conversations.search.filters), on either
database: they narrow the words' matches, list conversations alone, never reach another user's,
and a bad value is an error the page shows and the API answers 400."""

from __future__ import annotations

import html
import re
from datetime import datetime
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from conversations import search
from conversations.models import Conversation
from tests.search.chats import chat
from tests.search.test_api_and_admin import api_client

pytestmark = pytest.mark.django_db

SEARCH = reverse("conversation-search")
LIST = reverse("api-conversation-list")
HTMX = {"HX-Request": "true"}


def found(user: Any, typed: str) -> list[str]:
    return sorted(hit.conversation.title for hit in search.search(user, typed).hits)


def api_found(user: Any, typed: str) -> list[str]:
    response = api_client(user).get(LIST, {"q": typed})
    assert response.status_code == 200, response.content
    return sorted(c["title"] for c in response.json()["results"])


def last_active(conversation: Conversation, when: str) -> None:
    moment = timezone.make_aware(datetime.fromisoformat(when))
    Conversation.objects.filter(pk=conversation.pk).update(updated_at=moment)


@pytest.fixture
def models_chats(alice: Any, charlie: Any) -> None:
    chat(alice, "Small airships", "the zeppelin", model_slug="smollm2")
    chat(alice, "Big airships", "the zeppelin", model_slug="qwen-7b")
    chat(alice, "Small bread", "sourdough", model_slug="smollm2")
    chat(charlie, "Charlie's airships", "the zeppelin", model_slug="smollm2")


def test_model_narrows_the_words_to_that_models_conversations(
    alice: Any, models_chats: None
) -> None:
    for results in (found, api_found):
        assert results(alice, "zeppelin model:smollm2") == ["Small airships"]
        assert results(alice, "model:qwen-7b zeppel") == ["Big airships"]  # still a prefix
        assert results(alice, "zeppelin model:other") == []


def test_filters_alone_list_the_conversations_that_hold_them_newest_first(
    alice: Any, models_chats: None
) -> None:
    hits = search.search(alice, "model:smollm2").hits
    assert [h.conversation.title for h in hits] == ["Small bread", "Small airships"]
    assert all(h.message_id is None and h.snippet == "" for h in hits)
    assert api_found(alice, "model:smollm2") == ["Small airships", "Small bread"]


def test_filters_never_reach_another_users_conversations(
    alice: Any, charlie: Any, models_chats: None
) -> None:
    assert found(charlie, "model:smollm2") == ["Charlie's airships"]
    assert api_found(charlie, "zeppelin model:smollm2") == ["Charlie's airships"]
    assert found(alice, "model:smollm2 charlie") == []


@pytest.fixture
def dated(alice: Any) -> None:
    for title, when in [
        ("February", "2026-02-28T23:59:59"),
        ("March first", "2026-03-01T00:00:00"),
        ("March second", "2026-03-02T12:00:00"),
    ]:
        last_active(chat(alice, title, "zeppelin notes"), when)


@pytest.mark.parametrize(
    "typed, expected",
    [
        ("zeppelin before:2026-03-01", ["February"]),  # before that day
        ("zeppelin after:2026-03-01", ["March first", "March second"]),  # that day or later
        ("after:2026-03-01 before:2026-03-02 notes", ["March first"]),  # one day
        ("before:2026-03-01 after:2026-03-02", []),
        ("after:2026-03-01", ["March first", "March second"]),
    ],
)
def test_before_and_after_bound_the_day_last_active(
    alice: Any, dated: None, typed: str, expected: list[str]
) -> None:
    assert found(alice, typed) == expected
    assert api_found(alice, typed) == expected


@pytest.fixture
def alice_client(client: Client, alice: Any) -> Client:
    client.force_login(alice)
    return client


def test_the_page_shows_a_bad_filter_as_it_is_typed(alice_client: Client, alice: Any) -> None:
    chat(alice, "Kitchen", "sourdough")
    response = alice_client.get(SEARCH, {"q": "sourdough before:tomorrow"}, headers=HTMX)
    assert response.status_code == 200  # htmx swaps it into the box's status line
    page = response.content.decode()
    assert 'class="search-status error" role="alert"' in page
    assert "“before:” takes a date as YYYY-MM-DD, not “tomorrow”." in html.unescape(page)
    assert "search-hit" not in page


def test_without_javascript_a_bad_filter_is_a_400_page_saying_why(
    alice_client: Client, alice: Any
) -> None:
    chat(alice, "Kitchen", "sourdough")
    response = alice_client.get(SEARCH, {"q": 'model:"two words"'})
    assert response.status_code == 400
    page = html.unescape(response.content.decode())
    assert "“model:” takes a model's slug (letters, digits, - and _), not “two words”." in page
    assert 'id="conversation-list"' in page  # the rest of the page as ever


def test_the_bad_value_is_escaped(alice_client: Client) -> None:
    page = alice_client.get(SEARCH, {"q": "after:<img/src=x>"}, headers=HTMX).content.decode()
    assert "<img" not in page and "&lt;img/src=x&gt;" in page


def test_the_page_finds_by_a_filter_alone(alice_client: Client, alice: Any) -> None:
    kitchen = chat(alice, "Kitchen", "sourdough", model_slug="smollm2")
    chat(alice, "Garden", "tomatoes", model_slug="qwen-7b")
    page = alice_client.get(SEARCH, {"q": "model:smollm2"}, headers=HTMX).content.decode()
    titles = re.findall(r'<span class="hit-title">(.*?)</span>', page)
    assert titles == ["Kitchen"]
    assert f'href="{kitchen.get_absolute_url()}"' in page


@pytest.mark.parametrize(
    "typed, name",
    [("pinned:perhaps", "pinned"), ("before:03/01/2026", "before"), ("model:a model:b", "model")],
)
def test_the_api_answers_400_naming_the_filter(alice: Any, typed: str, name: str) -> None:
    for url in (LIST, reverse("api-export-jsonl")):
        response = api_client(alice).get(url, {"q": typed})
        assert response.status_code == 400
        [error] = response.json()["q"]
        assert error.startswith(f"“{name}:” ")


def test_the_admin_says_what_is_wrong_with_a_filter(alice: Any) -> None:
    from django.contrib.auth import get_user_model

    chat(alice, "Kitchen", "sourdough", model_slug="smollm2")
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("root", "r@example.com", "pw"))
    changelist = reverse("admin:conversations_conversation_changelist")
    response = client.get(changelist, {"q": "after:soon"})
    assert response.status_code == 200
    assert list(response.context["cl"].result_list) == []
    assert "“after:” takes a date as YYYY-MM-DD" in html.unescape(response.content.decode())
    response = client.get(changelist, {"q": "model:smollm2 sourdough"})
    assert [c.title for c in response.context["cl"].result_list] == ["Kitchen"]


@pytest.fixture
def organised(alice: Any, charlie: Any) -> dict[str, Conversation]:
    project_model = Conversation._meta.get_field("project").related_model
    plan = project_model.objects.create(owner=alice, name="Q3 plan")
    garden = project_model.objects.create(owner=alice, name="Garden")
    charlies = project_model.objects.create(owner=charlie, name="Q3 plan")
    chat(charlie, "Charlie's plan", "zeppelin budget", project=charlies, pinned=True)
    return {
        "planned": chat(alice, "Budget", "zeppelin budget", project=plan, pinned=True),
        "archived": chat(alice, "Old budget", "zeppelin budget", project=plan, archived=True),
        "garden": chat(alice, "Beds", "zeppelin budget", project=garden),
        "loose": chat(alice, "Loose", "zeppelin budget"),
    }


@pytest.mark.parametrize(
    "typed, expected",
    [
        ('project:"Q3 plan" budget', ["Budget", "Old budget"]),
        ("project:q3 budget", []),  # the whole name, in any case
        ('project:"q3 PLAN"', ["Budget", "Old budget"]),
        ("project:garden zeppelin", ["Beds"]),
        ("pinned:yes", ["Budget"]),
        ("pinned:no budget", ["Beds", "Loose", "Old budget"]),
        ("archived:yes", ["Old budget"]),
        ('archived:no project:"Q3 plan" zeppelin', ["Budget"]),
    ],
)
def test_project_pinned_and_archived_narrow_the_search(
    alice: Any, organised: dict[str, Conversation], typed: str, expected: list[str]
) -> None:
    assert found(alice, typed) == expected
    assert api_found(alice, typed) == expected


def test_another_users_project_of_the_same_name_is_never_reached(
    charlie: Any, organised: dict[str, Conversation]
) -> None:
    assert found(charlie, 'project:"Q3 plan"') == ["Charlie's plan"]
    assert api_found(charlie, "pinned:yes zeppelin") == ["Charlie's plan"]

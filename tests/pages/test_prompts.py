"""The prompt library's pages: the list, creating, editing and deleting one's own prompts, the
read-only shared ones, and the composer's JSON list; a stranger's prompt answers 404."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse

from conversations.models import Conversation, SavedPrompt
from conversations.services.saved_prompts import prompt_create

LIBRARY = "/settings/prompts/"
CHOICES = "/settings/prompts/choices/"


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def team(users: dict[str, Any]) -> Group:
    group = Group.objects.create(name="team")
    group.user_set.add(users["alice"], users["bob"])
    return group


@pytest.fixture
def library(users: dict[str, Any], team: Group) -> dict[str, SavedPrompt]:
    """alice's own prompt, bob's shared with the team, charlie's private one."""
    return {
        "alice": prompt_create(owner=users["alice"], title="Summarise", text="Sum up {{topic}}"),
        "bob": prompt_create(
            owner=users["bob"], title="Standup", text="Yesterday, today, blockers", group=team
        ),
        "charlie": prompt_create(owner=users["charlie"], title="Charlie's secret", text="Hush"),
    }


def test_it_lists_mine_and_my_groups_prompts_and_no_one_else_s(
    alice: Any, library: dict[str, SavedPrompt]
) -> None:
    page = client_for(alice).get(LIBRARY)

    assert page.status_code == 200
    html = page.content.decode()
    assert "Summarise" in html and "asks for topic" in html
    assert "Standup" in html and "By bob, shared with team" in html
    assert "Charlie" not in html
    # Only her own has Edit and Delete.
    assert reverse("prompt-edit", args=[library["alice"].pk]) in html
    assert reverse("prompt-edit", args=[library["bob"].pk]) not in html
    assert reverse("prompt-delete", args=[library["bob"].pk]) not in html


def test_settings_and_the_account_page_link_to_it(alice: Any) -> None:
    client = client_for(alice)
    assert LIBRARY in client.get(reverse("api-tokens")).content.decode()
    assert LIBRARY in client.get(reverse("account")).content.decode()


def test_it_creates_a_prompt_shared_with_one_of_my_groups(alice: Any, team: Group) -> None:
    response = client_for(alice).post(
        LIBRARY, {"title": "Translate", "text": "Into {{language}}:\n", "group": team.pk}
    )

    assert response.status_code == 302
    prompt = SavedPrompt.objects.get(title="Translate")
    assert (prompt.owner, prompt.text, prompt.group) == (alice, "Into {{language}}:\n", team)


def test_it_refuses_a_bad_prompt_with_its_reasons_and_keeps_what_was_typed(
    users: dict[str, Any], team: Group
) -> None:
    charlie = client_for(users["charlie"])
    response = charlie.post(
        LIBRARY, {"title": "", "text": "Hi {{first name}} <b>", "group": team.pk}
    )

    assert response.status_code == 400
    html = response.content.decode()
    assert "Give the prompt a title." in html
    assert "Share it with one of your own groups." in html  # charlie is not in the team
    assert not SavedPrompt.objects.exists()
    # What was typed comes back, escaped.
    assert "Hi {{first name}} &lt;b&gt;</textarea>" in html

    bad_name = charlie.post(LIBRARY, {"title": "Hello", "text": "Hi {{first name}}"})
    assert bad_name.status_code == 400
    assert "starting with a letter" in bad_name.content.decode()


def test_it_escapes_a_prompt_s_title_and_text(alice: Any) -> None:
    prompt_create(owner=alice, title="<script>x()</script>", text="<img src=x onerror=y()>")
    html = client_for(alice).get(LIBRARY).content.decode()
    assert "<script>x()" not in html and "&lt;script&gt;x()" in html
    assert "<img src=x" not in html


def test_it_edits_and_deletes_only_my_own(
    users: dict[str, Any], library: dict[str, SavedPrompt]
) -> None:
    alice, bob = client_for(users["alice"]), client_for(users["bob"])
    mine, bobs = library["alice"], library["bob"]
    edit = reverse("prompt-edit", args=[mine.pk])

    assert "Sum up {{topic}}" in alice.get(edit).content.decode()
    assert alice.post(edit, {"title": "Summary", "text": "Sum {{what}}"}).status_code == 302
    mine.refresh_from_db()
    assert (mine.title, mine.variables) == ("Summary", ["what"])
    assert alice.post(edit, {"title": "Summary", "text": "{{}}"}).status_code == 400

    # bob's prompt is shared with alice, to read: she may not change or delete it.
    assert alice.get(reverse("prompt-edit", args=[bobs.pk])).status_code == 404
    assert (
        alice.post(reverse("prompt-edit", args=[bobs.pk]), {"title": "x", "text": "y"}).status_code
        == 404
    )
    assert alice.post(reverse("prompt-delete", args=[bobs.pk])).status_code == 404
    assert bob.post(reverse("prompt-delete", args=[mine.pk])).status_code == 404
    assert SavedPrompt.objects.filter(pk__in=[mine.pk, bobs.pk]).count() == 2

    assert alice.post(reverse("prompt-delete", args=[mine.pk])).status_code == 302
    assert not SavedPrompt.objects.filter(pk=mine.pk).exists()


def test_a_stranger_gets_404_and_the_signed_out_the_login(
    users: dict[str, Any], library: dict[str, SavedPrompt]
) -> None:
    charlie = client_for(users["charlie"])
    for prompt in (library["alice"], library["bob"]):
        assert charlie.get(reverse("prompt-edit", args=[prompt.pk])).status_code == 404
        assert charlie.post(reverse("prompt-delete", args=[prompt.pk])).status_code == 404
    for url in (LIBRARY, CHOICES, reverse("prompt-edit", args=[library["alice"].pk])):
        response = Client().get(url)
        assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_the_delete_form_needs_its_csrf_token(alice: Any, library: dict[str, SavedPrompt]) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    assert client.post(reverse("prompt-delete", args=[library["alice"].pk])).status_code == 403
    assert client.post(LIBRARY, {"title": "T", "text": "t"}).status_code == 403


def test_the_composer_s_list_holds_mine_and_my_groups_prompts(
    users: dict[str, Any], library: dict[str, SavedPrompt]
) -> None:
    listed = client_for(users["alice"]).get(CHOICES).json()["prompts"]

    assert listed == [
        {
            "id": library["bob"].pk,
            "title": "Standup",
            "text": "Yesterday, today, blockers",
            "variables": [],
            "shared_by": "bob",
        },
        {
            "id": library["alice"].pk,
            "title": "Summarise",
            "text": "Sum up {{topic}}",
            "variables": ["topic"],
            "shared_by": None,
        },
    ]
    charlies = client_for(users["charlie"]).get(CHOICES).json()["prompts"]
    assert [p["title"] for p in charlies] == ["Charlie's secret"]


def test_the_chat_page_s_composer_asks_for_the_list(alice: Any, conversation: Conversation) -> None:
    html = client_for(alice).get(conversation.get_absolute_url()).content.decode()
    assert f'data-prompts="{CHOICES}"' in html
    assert 'id="prompt-menu" class="prompt-menu" role="listbox"' in html
    assert "chatsite/prompts" in html

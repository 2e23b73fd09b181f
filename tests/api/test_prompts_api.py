"""The prompt library through the REST API: your own to create, change and delete; your groups'
to read; anyone else's answers 404."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from conversations.models import SavedPrompt
from conversations.services.saved_prompts import prompt_create

PROMPTS = "/api/prompts/"


def one(prompt: SavedPrompt | int) -> str:
    return f"{PROMPTS}{prompt if isinstance(prompt, int) else prompt.pk}/"


@pytest.fixture
def team(users: dict[str, Any]) -> Group:
    group = Group.objects.create(name="team")
    group.user_set.add(users["alice"], users["bob"])
    return group


@pytest.fixture
def bobs_shared(users: dict[str, Any], team: Group) -> SavedPrompt:
    return prompt_create(owner=users["bob"], title="Standup", text="Blockers?", group=team)


@pytest.fixture
def charlies(users: dict[str, Any]) -> SavedPrompt:
    return prompt_create(owner=users["charlie"], title="Secret", text="Hush")


def test_it_creates_lists_and_reads_a_prompt(
    api: Client, alice: Any, team: Group, bobs_shared: SavedPrompt, charlies: SavedPrompt
) -> None:
    created = api.post(
        PROMPTS,
        {"title": "Review", "text": "Review {{language}} for {{topic}}", "group": team.pk},
        content_type="application/json",
    )

    assert created.status_code == 201, created.content
    body = created.json()
    assert set(body) == {
        "id",
        "title",
        "text",
        "variables",
        "group",
        "owner",
        "mine",
        "created_at",
        "updated_at",
    }
    assert body["variables"] == ["language", "topic"]
    assert (body["group"], body["owner"], body["mine"]) == (team.pk, "alice", True)
    listed = api.get(PROMPTS).json()
    assert [(p["title"], p["mine"]) for p in listed] == [("Review", True), ("Standup", False)]
    assert api.get(one(body["id"])).json()["text"] == "Review {{language}} for {{topic}}"
    assert api.get(one(bobs_shared)).json()["owner"] == "bob"


def test_it_changes_and_deletes_only_my_own(
    api: Client, alice: Any, bobs_shared: SavedPrompt
) -> None:
    mine = prompt_create(owner=alice, title="Mine", text="Hi")

    changed = api.patch(one(mine), {"text": "Hi {{name}}"}, content_type="application/json")
    assert changed.status_code == 200
    assert changed.json()["variables"] == ["name"] and changed.json()["title"] == "Mine"
    # A shared prompt is read-only: refused, and unchanged.
    refused = api.patch(one(bobs_shared), {"title": "Mine now"}, content_type="application/json")
    assert refused.status_code == 403
    assert api.delete(one(bobs_shared)).status_code == 403
    bobs_shared.refresh_from_db()
    assert bobs_shared.title == "Standup"

    assert api.delete(one(mine)).status_code == 204
    assert not SavedPrompt.objects.filter(pk=mine.pk).exists()


def test_a_stranger_s_prompt_answers_404(
    api: Client, charlie_api: Client, charlies: SavedPrompt, bobs_shared: SavedPrompt
) -> None:
    for method in ("get", "patch", "delete"):
        response = getattr(api, method)(one(charlies), content_type="application/json")
        assert response.status_code == 404
    # charlie is not in bob's team.
    assert charlie_api.get(one(bobs_shared)).status_code == 404
    assert [p["title"] for p in charlie_api.get(PROMPTS).json()] == ["Secret"]
    assert Client().get(PROMPTS).status_code == 401


def test_it_refuses_bad_values_by_field(
    api: Client, users: dict[str, Any], team: Group, settings: Any
) -> None:
    settings.CHAT_MAX_PROMPT_CHARS = 20
    cases = [
        ({"title": "", "text": "Hi"}, "title"),
        ({"title": "t" * 101, "text": "Hi"}, "title"),
        ({"title": "Long", "text": "x" * 21}, "text"),
        ({"title": "Bad", "text": "Hi {{first name}}"}, "text"),
        ({"title": "NUL", "text": "a\x00b"}, "text"),
        ({"text": "Hi"}, "title"),
    ]
    for values, field in cases:
        response = api.post(PROMPTS, values, content_type="application/json")
        assert response.status_code == 400, values
        assert field in response.json(), (values, response.json())
    # A group that is not alice's, such as charlie's, is refused like one that does not exist.
    theirs = Group.objects.create(name="theirs")
    theirs.user_set.add(users["charlie"])
    response = api.post(
        PROMPTS, {"title": "T", "text": "t", "group": theirs.pk}, content_type="application/json"
    )
    assert response.status_code == 400
    assert response.json()["group"] == ["Share it with one of your own groups."]
    assert not SavedPrompt.objects.exists()

"""The prompt library's writes: what a saved prompt may hold, and who sees it."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError

from conversations.models import SavedPrompt
from conversations.services import saved_prompts
from conversations.services.saved_prompts import prompt_create, prompt_update


@pytest.fixture
def team(users: dict[str, Any]) -> Group:
    """alice and bob are in the team; charlie is not."""
    group = Group.objects.create(name="team")
    group.user_set.add(users["alice"], users["bob"])
    return group


def refusal(**values: Any) -> dict[str, list[str]]:
    with pytest.raises(ValidationError) as refused:
        prompt_create(**values)
    return refused.value.message_dict


def test_it_saves_a_prompt_with_its_variables_in_order(alice: Any) -> None:
    prompt = prompt_create(
        owner=alice,
        title="  Review  ",
        text="Review {{ language }} code for {{topic}} in {{language}}",
    )

    assert prompt.title == "Review"
    assert prompt.variables == ["language", "topic"]
    assert SavedPrompt.objects.owned_by(alice).get() == prompt


def test_it_refuses_a_missing_or_long_title_and_an_empty_or_long_text(
    alice: Any, settings: Any
) -> None:
    settings.CHAT_MAX_PROMPT_CHARS = 50
    assert "title" in refusal(owner=alice, title="  ", text="Hello")
    long_title = refusal(owner=alice, title="t" * 101, text="Hello")["title"][0]
    assert "at most 100 characters; this one has 101" in long_title
    assert "text" in refusal(owner=alice, title="Hi", text=" \n ")
    long_text = refusal(owner=alice, title="Hi", text="x" * 51)["text"][0]
    assert "at most 50 characters" in long_text and "has 51" in long_text
    assert "NUL" in refusal(owner=alice, title="Hi", text="a\x00b")["text"][0]
    assert not SavedPrompt.objects.exists()


@pytest.mark.parametrize(
    "text", ["Hi {{}}", "Hi {{2nd}}", "Hi {{first name}}", "Hi {{a-b}}", "Hi {{" + "a" * 41 + "}}"]
)
def test_it_refuses_a_badly_named_variable(alice: Any, text: str) -> None:
    error = refusal(owner=alice, title="Bad", text=text)["text"][0]
    assert "starting with a letter" in error


def test_it_refuses_more_than_twenty_variables(alice: Any) -> None:
    text = " ".join("{{v" + str(i) + "}}" for i in range(21))
    assert (
        "at most 20 different variables" in refusal(owner=alice, title="Many", text=text)["text"][0]
    )
    # The same variable twice counts once.
    assert prompt_create(owner=alice, title="Twice", text="{{a}} {{a}}").variables == ["a"]


def test_it_shares_only_with_a_group_of_the_owner_s(users: dict[str, Any], team: Group) -> None:
    assert "group" in refusal(owner=users["charlie"], title="Mine", text="Hi", group=team)
    shared = prompt_create(owner=users["alice"], title="Ours", text="Hi", group=team)

    assert list(SavedPrompt.objects.visible_to(users["bob"])) == [shared]
    assert list(SavedPrompt.objects.owned_by(users["bob"])) == []
    assert list(SavedPrompt.objects.visible_to(users["charlie"])) == []


def test_an_update_is_checked_like_a_creation(alice: Any) -> None:
    prompt = prompt_create(owner=alice, title="One", text="Hi")
    with pytest.raises(ValidationError):
        prompt_update(prompt=prompt, title="", text="{{bad name}}", group=None)
    prompt.refresh_from_db()
    assert (prompt.title, prompt.text) == ("One", "Hi")


def test_a_user_keeps_at_most_the_limit(alice: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(saved_prompts, "MAX_PROMPTS_PER_USER", 2)
    prompt_create(owner=alice, title="1", text="a")
    prompt_create(owner=alice, title="2", text="b")
    with pytest.raises(ValidationError, match="delete one to save another"):
        prompt_create(owner=alice, title="3", text="c")

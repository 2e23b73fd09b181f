"""chatsite's own exports: export, import as someone else, export again gives the same content."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from conversations.imports.importer import ALREADY_HERE
from conversations.models import Conversation, Message
from tests.imports.helpers import imported, upload

pytestmark = pytest.mark.django_db


def reply(conversation: Conversation, parent: Message, content: str, **fields: Any) -> Message:
    """A settled reply with the metrics and timings a real generation leaves."""
    message = Message.objects.create(
        conversation=conversation,
        parent=parent,
        role="assistant",
        content=content,
        engine="scripted",
        model="scripted-1",
        model_slug="default",
        system_prompt="Be brief.",
        temperature=0.3,
        max_tokens=100,
        request_id=f"req-{content[:10]}",
        prompt_tokens=12,
        completion_tokens=fields.pop("completion_tokens", 8),
        finish_reason=fields.pop("finish_reason", "stop"),
        **fields,
    )
    start = message.created_at
    Message.objects.filter(pk=message.pk).update(
        engine_ready_at=start + timedelta(milliseconds=40),  # the model was loading
        first_token_at=start + timedelta(milliseconds=150),
        finished_at=start + timedelta(seconds=2),
    )
    return message


def branched(owner: Any) -> Conversation:
    """A first question answered twice (the second stopped), then the question edited and
    answered: the edit's branch is shown."""
    chat = Conversation.objects.create(
        owner=owner,
        title="Colours",
        title_is_custom=True,
        model_slug="default",
        system_prompt="Be brief.",
        temperature=0.3,
        max_tokens=100,
    )
    question = Message.objects.create(conversation=chat, role="user", content="Name a colour")
    reply(chat, question, "Blue.")
    stopped_at = timezone.now()
    reply(
        chat,
        question,
        "Gre",
        status="cancelled",
        completion_tokens=1,
        finish_reason="abort",
        cancelled_by="alice",
        cancel_requested_at=stopped_at,
        cancel_confirmed_at=stopped_at + timedelta(milliseconds=9),
        cancel_latency_ms=9.0,
    )
    edited = Message.objects.create(conversation=chat, role="user", content="Name two colours")
    last = reply(chat, edited, "Red and blue.")
    Conversation.objects.filter(pk=chat.pk).update(current_leaf=last)
    return chat


def plain_list(owner: Any) -> Conversation:
    """A conversation written before branches: messages without parents."""
    chat = Conversation.objects.create(owner=owner, title="Old one")
    Message.objects.create(conversation=chat, role="user", content="Hello")
    Message.objects.create(
        conversation=chat, role="assistant", content="", status="error", error="engine crashed"
    )
    return chat


def same_content(data: dict[str, Any]) -> dict[str, Any]:
    """An exported conversation without what an import changes: ids (messages name their
    parent by position instead), the owner, and the request ids of the server that replied."""
    position = {m["id"]: i for i, m in enumerate(data["messages"])}
    messages = [
        {k: v for k, v in m.items() if k not in ("id", "parent", "request_id", "version")}
        | {"parent": position.get(m["parent"]), "version": m["version"][:2]}
        for m in data["messages"]
    ]
    kept = {
        k: v for k, v in data.items() if k not in ("id", "owner", "messages", "current_message")
    }
    return kept | {"messages": messages, "current": position.get(data["current_message"])}


def test_a_conversation_with_branches_comes_back_the_same(
    alice: Any, alice_api: Client, bob_api: Client
) -> None:
    chat = branched(alice)
    exported = alice_api.get(f"/api/conversations/{chat.pk}/export?format=json")

    response = bob_api.post("/api/imports/", {"file": upload(exported.content, "colours.json")})

    assert response.status_code == 201, response.content
    assert response.json()["format"] == "chatsite"
    copy = response.json()["imported"][0]
    assert copy["messages"] == 5 and copy["id"] != str(chat.pk)
    again = bob_api.get(f"/api/conversations/{copy['id']}/export?format=json").json()
    assert again["owner"] == "bob"
    assert same_content(again) == same_content(exported.json())
    # Every message is a new row of bob's; alice's are as they were.
    assert not {m["id"] for m in again["messages"]} & {m["id"] for m in exported.json()["messages"]}
    assert Message.objects.filter(conversation=chat).count() == 5


def test_the_jsonl_export_of_everything_comes_back_the_same(
    alice: Any, alice_api: Client, bob: Any, bob_api: Client
) -> None:
    branched(alice)
    plain_list(alice)
    exported = alice_api.get("/api/export.jsonl")
    assert "Link" not in exported, "one page"

    response = bob_api.post("/api/imports/", {"file": upload(exported.content, "all.jsonl")})

    assert response.status_code == 201, response.content
    assert len(response.json()["imported"]) == 2
    again = bob_api.get("/api/export.jsonl").content
    assert [same_content(json.loads(line)) for line in again.splitlines()] == [
        same_content(json.loads(line)) for line in exported.content.splitlines()
    ]
    old_one = Conversation.objects.get(owner=bob, title="Old one")
    assert old_one.current_leaf is None, "a plain list stays one"


def test_importing_your_own_export_skips_what_you_have(alice: Any, alice_api: Client) -> None:
    chat = branched(alice)
    exported = alice_api.get(f"/api/conversations/{chat.pk}/export?format=json").content

    report = imported(alice, exported)

    assert report.imported == []
    assert [(s.title, s.reason) for s in report.skipped] == [("Colours", ALREADY_HERE)]
    assert Conversation.objects.filter(owner=alice).count() == 1


def test_an_api_callers_tool_calls_and_results_come_back_the_same(
    alice: Any, alice_api: Client, bob_api: Client
) -> None:
    chat = Conversation.objects.create(owner=alice, title="Weather")
    question = Message.objects.create(conversation=chat, role="user", content="Weather?")
    call = {"id": "call_9", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    asked = reply(chat, question, "", tool_calls=[call], finish_reason="tool_calls")
    result = Message.objects.create(
        conversation=chat, parent=asked, role="tool", content="Sunny", tool_call_id="call_9"
    )
    last = reply(chat, result, "It is sunny.")
    Conversation.objects.filter(pk=chat.pk).update(current_leaf=last)
    exported = alice_api.get(f"/api/conversations/{chat.pk}/export?format=json")

    response = bob_api.post("/api/imports/", {"file": upload(exported.content, "weather.json")})

    assert response.status_code == 201, response.content
    copy = response.json()["imported"][0]
    again = bob_api.get(f"/api/conversations/{copy['id']}/export?format=json").json()
    assert same_content(again) == same_content(exported.json())
    assert [(m["role"], m["tool_calls"], m["tool_call_id"]) for m in again["messages"]] == [
        ("user", [], ""),
        ("assistant", [call], ""),
        ("tool", [], "call_9"),
        ("assistant", [], ""),
    ]

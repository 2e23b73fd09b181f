"""Feedback through the REST API: a message shows its owner's rating, and GET /api/feedback.jsonl
hands a user their own rated replies for evaluation, a page at a time."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from conversations.api import feedback as feedback_api
from conversations.models import Conversation, Message
from conversations.services.feedback import feedback_rate
from conversations.services.prompt import load_history
from tests.support.feedback import two_replies

EXPORT = reverse("api-feedback-jsonl")


@pytest.fixture
def replies(conversation: Conversation) -> list[Message]:
    return two_replies(conversation)


def lines(response: Any) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/x-ndjson"
    return [json.loads(line) for line in response.content.decode().splitlines()]


def test_a_message_shows_its_rating_to_its_owner(
    api: Client, alice: Any, conversation: Conversation, replies: list[Message]
) -> None:
    feedback_rate(user=alice, message=replies[1], rating="down", reason="Off topic")
    detail = reverse("api-conversation-detail", args=[conversation.pk])
    with CaptureQueriesContext(connection) as queries:
        messages = api.get(detail).json()["messages"]
    shown = {m["id"]: m["feedback"] for m in messages}
    assert shown[replies[1].pk] == {"rating": "down", "reason": "Off topic"}
    assert shown[replies[0].pk] is None
    # Read with the messages (a join), not a query a reply.
    assert not [q for q in queries.captured_queries if 'FROM "conversations_feedback"' in q["sql"]]
    assert any('JOIN "conversations_feedback"' in q["sql"] for q in queries.captured_queries)
    export = reverse("api-conversation-export", args=[conversation.pk])
    exported = {m["id"]: m["feedback"] for m in api.get(export).json()["messages"]}
    assert exported[replies[1].pk] == {"rating": "down", "reason": "Off topic"}


def test_the_jsonl_export_holds_each_rated_reply_with_the_prompt_the_model_got(
    api: Client, alice: Any, conversation: Conversation, replies: list[Message]
) -> None:
    feedback_rate(user=alice, message=replies[1], rating="down", reason="Wrong port")
    feedback_rate(user=alice, message=replies[0], rating="up")
    records = lines(api.get(EXPORT))
    assert [r["message"] for r in records] == [replies[1].pk, replies[0].pk]  # oldest rating first
    down = records[0]
    history = load_history(conversation.pk, leaf=replies[1].parent_id)
    assert down["prompt"] == [
        {"role": "system", "content": "Answer briefly."},
        *({"role": m.role, "content": m.content} for m in history),
    ]
    assert [m["content"] for m in down["prompt"][1:]] == [
        "What is a socket?",
        "An answer to What is a socket?",
        "And a port?",
    ]
    assert {k: down[k] for k in ("reply", "rating", "reason", "model", "conversation")} == {
        "reply": "An answer to And a port?",
        "rating": "down",
        "reason": "Wrong port",
        "model": "small",
        "conversation": str(conversation.pk),
    }
    assert down["settings"]["system_prompt"] == "Answer briefly."
    assert records[1]["prompt"][1:] == [{"role": "user", "content": "What is a socket?"}]


def test_it_pages_with_a_signed_cursor(
    api: Client, alice: Any, replies: list[Message], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(feedback_api, "PAGE_SIZE", 1)
    for reply in replies:
        feedback_rate(user=alice, message=reply, rating="up")
    first = api.get(EXPORT)
    assert [r["message"] for r in lines(first)] == [replies[0].pk]
    next_url = first["Link"].split(">", 1)[0].lstrip("<")
    second = api.get(next_url)
    assert [r["message"] for r in lines(second)] == [replies[1].pk]
    assert "Link" not in second
    forged = api.get(EXPORT, {"cursor": "1"})
    assert forged.status_code == 400 and "cursor" in forged.json()


def test_charlie_gets_none_of_alice_s_ratings(
    charlie_api: Client,
    alice: Any,
    charlie: Any,
    conversation: Conversation,
    replies: list[Message],
) -> None:
    feedback_rate(user=alice, message=replies[0], rating="down", reason="private reason")
    assert lines(charlie_api.get(EXPORT)) == []
    detail = reverse("api-conversation-detail", args=[conversation.pk])
    assert charlie_api.get(detail).status_code == 404
    assert Client().get(EXPORT).status_code in (401, 403)

"""Feedback in the admin: the ratings filtered by rating, model and date, each model's approval
share, and the rated replies as JSONL; readers who may not read conversations see no text."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from conversations.models import AuditEvent, Conversation, Feedback, Message
from conversations.services.feedback import feedback_rate
from tests.admin.conftest import staff
from tests.support.feedback import two_replies

CHANGELIST = reverse("admin:conversations_feedback_changelist")


@pytest.fixture
def rated(alice: Any, users: dict[str, Any]) -> list[Feedback]:
    """Model "small": alice's up and down (with a reason), bob's up; model "large": bob's down."""
    mine = two_replies(Conversation.objects.create(owner=alice, title="Sockets"))
    bobs = two_replies(Conversation.objects.create(owner=users["bob"], title="Ports"))
    large = two_replies(Conversation.objects.create(owner=users["bob"]), model_slug="large")
    ratings = [
        (alice, mine[0], "up", ""),
        (alice, mine[1], "down", "It confused ports with sockets"),
        (users["bob"], bobs[0], "up", ""),
        (users["bob"], large[0], "down", "Too long"),
    ]
    return [
        feedback
        for user, reply, rating, reason in ratings
        if (feedback := feedback_rate(user=user, message=reply, rating=rating, reason=reason))
    ]


def listed(page: str) -> set[int]:
    """The ratings a changelist page lists, by id."""
    marker = 'name="_selected_action" value="'
    return {int(part.split('"', 1)[0]) for part in page.split(marker)[1:]}


def approval(page: str) -> dict[str, tuple[str, str, str]]:
    """The approval table's rows: model -> (rated, ups, share)."""
    start = page.index('id="approval"')
    table = page[start : page.index("</table>", start)]
    rows = {}
    for row in table.split('<tr data-model="')[1:]:
        model = row[: row.index('"')]
        cells = [
            row[row.index(f'class="{name}">') + len(name) + 9 :].split("<", 1)[0]
            for name in ("rated", "ups", "share")
        ]
        rows[model] = (cells[0], cells[1], cells[2])
    return rows


def test_it_lists_a_thumbs_down_with_its_reason_filtered_by_rating_and_model(
    superuser: Client, rated: list[Feedback]
) -> None:
    downs = superuser.get(CHANGELIST, {"rating__exact": "down"}).content.decode()
    assert "It confused ports with sockets" in downs and "Too long" in downs
    assert listed(downs) == {rated[1].pk, rated[3].pk}  # the ups are filtered out
    small_downs = superuser.get(CHANGELIST, {"rating__exact": "down", "model_slug": "small"})
    assert "It confused ports with sockets" in small_downs.content.decode()
    assert listed(small_downs.content.decode()) == {rated[1].pk}


def test_it_shows_each_model_s_approval_share_over_what_the_filters_keep(
    superuser: Client, rated: list[Feedback]
) -> None:
    page = superuser.get(CHANGELIST).content.decode()
    assert approval(page) == {"small": ("3", "2", "67%"), "large": ("1", "0", "0%")}
    assert approval(superuser.get(CHANGELIST, {"model_slug": "large"}).content.decode()) == {
        "large": ("1", "0", "0%")
    }
    # A period: ratings from before it do not count.
    Feedback.objects.filter(pk=rated[0].pk).update(created_at=timezone.now() - timedelta(days=40))
    since = (timezone.now() - timedelta(days=7)).isoformat()
    recent = superuser.get(CHANGELIST, {"created_at__gte": since}).content.decode()
    assert approval(recent) == {"small": ("2", "1", "50%"), "large": ("1", "0", "0%")}
    assert Feedback.objects.approval_by_model() == [
        {"model_slug": "small", "rated": 3, "ups": 2, "share": pytest.approx(2 / 3)},
        {"model_slug": "large", "rated": 1, "ups": 0, "share": 0.0},
    ]


def test_it_exports_the_selected_rated_replies_as_jsonl(
    superuser: Client, rated: list[Feedback]
) -> None:
    down = rated[1]
    response = superuser.post(
        CHANGELIST, {"action": "export_jsonl", "_selected_action": [down.pk, rated[3].pk]}
    )
    assert response.status_code == 200
    assert response["Content-Type"] == "application/x-ndjson"
    lines = [json.loads(line) for line in response.content.decode().splitlines()]
    assert [line["message"] for line in lines] == [down.message_id, rated[3].message_id]
    first = lines[0]
    assert first["prompt"] == [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "What is a socket?"},
        {"role": "assistant", "content": "An answer to What is a socket?"},
        {"role": "user", "content": "And a port?"},
    ]
    assert first["reply"] == "An answer to And a port?"
    assert (first["rating"], first["reason"], first["model"]) == (
        "down",
        "It confused ports with sockets",
        "small",
    )
    assert first["settings"]["temperature"] == 0.3
    assert first["created_at"].startswith(str(timezone.now().year))
    # Reading other people's conversations into a file is a view of each, in the audit log.
    assert (
        AuditEvent.objects.filter(event="staff_view", detail__view="feedback export").count() == 2
    )


def test_staff_who_may_not_read_conversations_see_the_ratings_without_their_text(
    settings: Any, rated: list[Feedback]
) -> None:
    settings.CHAT_STAFF_CAN_READ = False
    reader = staff("counter", "view_feedback")
    page = reader.get(CHANGELIST).content.decode()
    assert approval(page)["small"] == ("3", "2", "67%")
    assert "It confused ports with sockets" not in page
    refused = reader.post(
        CHANGELIST, {"action": "export_jsonl", "_selected_action": [rated[1].pk]}, follow=True
    )
    assert "CHAT_STAFF_CAN_READ" in refused.content.decode()
    assert refused["Content-Type"].startswith("text/html")
    detail = reader.get(reverse("admin:conversations_feedback_change", args=[rated[1].pk]))
    assert "It confused ports with sockets" not in detail.content.decode()


def test_staff_without_the_permission_and_users_are_refused(
    alice: Any, reviewer: Client, rated: list[Feedback]
) -> None:
    assert reviewer.get(CHANGELIST).status_code == 403
    user = Client()
    user.force_login(alice)
    assert user.get(CHANGELIST).status_code == 302  # to the admin's login: not staff
    # Nothing here changes a rating.
    root = staff("rater", "view_feedback", "change_feedback", "delete_feedback")
    change = reverse("admin:conversations_feedback_change", args=[rated[0].pk])
    root.post(change, {"rating": "down"})
    assert Feedback.objects.get(pk=rated[0].pk).rating == "up"
    assert Message.objects.filter(pk=rated[0].message_id).exists()

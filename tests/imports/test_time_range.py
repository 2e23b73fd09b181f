"""Times a file states that are valid ISO 8601 but out of the range Python holds once in UTC
(the year 9999 west of Greenwich, the year 1 east of it): the conversation is refused, as any
time that is not one is, so nothing is stored that the owner's pages could not show."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from conversations.models import Conversation
from conversations.services.tokens import api_token_create
from tests.imports.helpers import upload
from tests.imports.sources import as_json, claude_conversation

pytestmark = pytest.mark.django_db

# Valid ISO times whose UTC is the year 10000, or the year 0.
OUT_OF_RANGE = ["9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00"]
FAR = "5ca1ab1e-0000-4000-8000-00000000fa12"


def far_conversation(when: str, place: str) -> dict[str, Any]:
    far = claude_conversation(FAR) | {"name": "Far"}
    if place == "conversation":
        far["created_at"] = far["updated_at"] = when
    else:
        far["chat_messages"][-1]["created_at"] = when
        del far["updated_at"]  # so the conversation takes its newest message's time
    return far


def answers(user: Any) -> tuple[Client, Client]:
    """A logged-in browser and an API client of `user`'s, answering 500 rather than raising."""
    page = Client(raise_request_exception=False)
    page.force_login(user)
    token = api_token_create(user=user, name="t")[1]
    api = Client(raise_request_exception=False, headers={"Authorization": f"Bearer {token}"})
    return page, api


def every_page(owner: Any, page: Client, api: Client) -> dict[str, int]:
    """The status of every page and API answer showing the owner's conversations, the
    admin's list of everyone's among them."""
    root = get_user_model().objects.filter(is_superuser=True).first()
    root = root or get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    admin = Client(raise_request_exception=False)
    admin.force_login(root)
    status = {
        url: client.get(url).status_code
        for client, url in [
            (page, "/"),
            (api, "/api/conversations/"),
            (api, "/api/export.jsonl"),
            (admin, reverse("admin:conversations_conversation_changelist")),
        ]
    }
    for conversation in Conversation.objects.filter(owner=owner):
        status[conversation.get_absolute_url()] = page.get(
            conversation.get_absolute_url()
        ).status_code
        api_url = f"/api/conversations/{conversation.pk}/"
        for url in (api_url, f"{api_url}export"):
            status[url] = api.get(url).status_code
    return status


def delete_all(owner: Any, page: Client) -> set[int]:
    """The statuses of deleting each of the owner's conversations."""
    return {
        page.post(reverse("conversation-delete", args=[pk])).status_code
        for pk in Conversation.objects.filter(owner=owner).values_list("pk", flat=True)
    }


@pytest.mark.parametrize("place", ["conversation", "message"])
@pytest.mark.parametrize("when", OUT_OF_RANGE)
def test_finding_2_a_time_out_of_range_in_utc_is_refused_and_every_page_still_answers(
    alice: Any, when: str, place: str
) -> None:
    page, api = answers(alice)
    data = as_json([far_conversation(when, place), claude_conversation()])

    kept = api.post("/api/imports/", {"file": upload(data, "c.json"), "keep_partial": "true"})

    assert kept.status_code == 201
    pages = every_page(alice, page, api)
    assert set(pages.values()) == {200}, pages
    assert delete_all(alice, page) == {302}
    assert [(s["title"], s["reason"]) for s in kept.json()["skipped"] if s["messages"] is None] == [
        ("Far", reason_for(place, when))
    ]
    assert [i["title"] for i in kept.json()["imported"]] == ["Planning a trip"]

    refused = api.post("/api/imports/", {"file": upload(data, "c.json")})
    assert refused.status_code == 400
    assert refused.json()["code"] == "bad_conversation"
    assert reason_for(place, when) in refused.json()["detail"]


def reason_for(place: str, when: str) -> str:
    what = "Its `created_at`" if place == "conversation" else "A message's `created_at`"
    return f"{what} is out of the range of times chatsite keeps: {when!r}."


def test_times_at_the_ends_of_the_range_import(alice: Any) -> None:
    page, api = answers(alice)
    early = claude_conversation("5ca1ab1e-0000-4000-8000-0000000000e1") | {"name": "Early"}
    early["chat_messages"][0]["created_at"] = "0001-01-02T00:00:00-14:00"
    late = claude_conversation("5ca1ab1e-0000-4000-8000-0000000000e2") | {"name": "Late"}
    late["updated_at"] = "9999-12-30T23:59:59+14:00"

    response = api.post("/api/imports/", {"file": upload(as_json([early, late]), "c.json")})

    assert response.status_code == 201, response.json()
    assert len(response.json()["imported"]) == 2
    pages = every_page(alice, page, api)
    assert set(pages.values()) == {200}, pages
    assert delete_all(alice, page) == {302}


@pytest.mark.parametrize(
    ("first_token_at", "ttft_ms"),
    [("0001-01-02T00:00:00Z", 2 * 86_400_000), ("2024-03-01T09:00:00Z", 1e300)],
)
def test_finding_2_a_time_to_first_token_that_leads_out_of_range_is_refused(
    alice: Any, first_token_at: str, ttft_ms: float
) -> None:
    """chatsite's export gives a reply's time to first token; the moment its engine was ready
    is worked out from it, and must be in range too."""
    _, api = answers(alice)
    exported = {
        "id": "c4a75173-0000-4000-8000-000000000001",
        "title": "Timed",
        "current_message": 2,
        "messages": [
            {"id": 1, "parent": None, "role": "user", "content": "Hi"},
            {
                "id": 2,
                "parent": 1,
                "role": "assistant",
                "content": "Hello",
                "first_token_at": first_token_at,
                "ttft_ms": ttft_ms,
            },
        ],
    }

    refused = api.post("/api/imports/", {"file": upload(as_json(exported), "c.json")})

    assert refused.status_code == 400
    assert refused.json() == {
        "code": "bad_conversation",
        "detail": "Conversation 1 of the file (Timed): A message's `ttft_ms` puts the moment its "
        "engine was ready out of the range of times chatsite keeps. Nothing was imported; "
        "choose to keep what can be imported to import the others.",
    }
    assert not Conversation.objects.exists()

"""The REST API's pinned, archived and project: read in the list, the detail and the exports,
set by PATCH, and brought back by importing chatsite's own export."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from conversations.models import Conversation, Message, Project
from tests.imports.helpers import api_client, upload

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def organised(alice: Any) -> Conversation:
    project = Project.objects.create(owner=alice, name="Research")
    conversation = Conversation.objects.create(
        owner=alice, title="Papers", pinned=True, archived=True, project=project
    )
    Message.objects.create(conversation=conversation, role="user", content="Read this")
    return conversation


def test_the_list_and_the_detail_carry_the_fields(api: Client, organised: Conversation) -> None:
    (row,) = api.get(reverse("api-conversation-list")).json()["results"]
    detail = api.get(reverse("api-conversation-detail", args=[organised.pk])).json()
    for data in (row, detail):
        assert (data["pinned"], data["archived"]) == (True, True)
        assert (data["project"], data["project_name"]) == (organised.project_id, "Research")


def test_patch_pins_archives_and_moves(api: Client, alice: Any) -> None:
    conversation = Conversation.objects.create(owner=alice, title="Loose")
    project = Project.objects.create(owner=alice, name="Home")
    url = reverse("api-conversation-detail", args=[conversation.pk])

    changed = api.patch(
        url,
        {"pinned": True, "archived": True, "project": project.pk},
        content_type="application/json",
    )

    assert changed.status_code == 200, changed.content
    assert (changed.json()["pinned"], changed.json()["archived"]) == (True, True)
    assert changed.json()["project_name"] == "Home"
    out = api.patch(url, {"project": None, "pinned": False}, content_type="application/json")
    assert (out.json()["project"], out.json()["pinned"], out.json()["archived"]) == (
        None,
        False,
        True,
    )


def test_patch_refuses_a_project_not_yours_and_changes_nothing(
    api: Client, alice: Any, charlie: Any
) -> None:
    conversation = Conversation.objects.create(owner=alice, title="Mine")
    theirs = Project.objects.create(owner=charlie, name="Charlie's")
    url = reverse("api-conversation-detail", args=[conversation.pk])

    refused = api.patch(
        url,
        {"title": "Renamed", "pinned": True, "project": theirs.pk},
        content_type="application/json",
    )

    assert refused.status_code == 400 and "project" in refused.json()
    conversation.refresh_from_db()
    assert (conversation.title, conversation.pinned, conversation.project) == ("Mine", False, None)


def test_charlie_cannot_patch_alice_s(charlie_api: Client, organised: Conversation) -> None:
    url = reverse("api-conversation-detail", args=[organised.pk])
    response = charlie_api.patch(url, {"pinned": False}, content_type="application/json")
    assert response.status_code == 404
    organised.refresh_from_db()
    assert organised.pinned


def test_the_exports_carry_them_and_an_import_brings_them_back(
    api: Client, organised: Conversation, users: dict[str, Any]
) -> None:
    exported = api.get(reverse("api-conversation-export", args=[organised.pk]), {"format": "json"})
    data = exported.json()
    assert (data["pinned"], data["archived"], data["project_name"]) == (True, True, "Research")
    line = json.loads(api.get("/api/export.jsonl").content.splitlines()[0])
    assert (line["pinned"], line["archived"], line["project_name"]) == (True, True, "Research")

    bob = users["bob"]
    bobs_research = Project.objects.create(owner=bob, name="Research")
    response = api_client(bob).post("/api/imports/", {"file": upload(exported.content, "p.json")})

    assert response.status_code == 201, response.content
    copy = Conversation.objects.get(pk=response.json()["imported"][0]["id"])
    assert (copy.owner, copy.pinned, copy.archived) == (bob, True, True)
    assert copy.project == bobs_research, "filed in bob's own project of that name"
    assert Project.objects.filter(name="Research").count() == 2, "alice's is not bob's"


def test_an_import_makes_a_project_the_importer_lacks(
    api: Client, organised: Conversation, charlie: Any
) -> None:
    exported = api.get(reverse("api-conversation-export", args=[organised.pk]), {"format": "json"})
    response = api_client(charlie).post(
        "/api/imports/", {"file": upload(exported.content, "p.json")}
    )
    assert response.status_code == 201, response.content
    copy = Conversation.objects.get(pk=response.json()["imported"][0]["id"])
    assert copy.project is not None
    assert (copy.project.owner, copy.project.name) == (charlie, "Research")

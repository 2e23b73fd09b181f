"""Projects: made, changed and deleted in their page; a new conversation in one starts with its
model, system prompt and sampling, which reach the engine; a group it is shared with reads it."""

from __future__ import annotations

from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse

from conversations.engines import get_engine
from conversations.engines.base import ChatMessage
from conversations.models import Conversation, Message, Project
from conversations.services.conversations import conversation_create
from tests.support.sockets import finished

pytestmark = [pytest.mark.django_db]

FIELDS = {
    "name": "Cookbook",
    "model": "careful",
    "system_prompt": "You are a ship's cook.\r\nAnswer briefly.",
    "temperature": "0.3",
    "max_tokens": "40",
}


def signed_in(user: Any) -> Client:
    browser = Client()
    browser.force_login(user)
    return browser


def made_project(browser: Client, **fields: Any) -> Project:
    response = browser.post(reverse("project-new"), {**FIELDS, **fields})
    assert response.status_code == 302, response.content.decode()
    return Project.objects.get(pk=response.url.split("/")[-2])


def test_a_new_conversation_in_a_project_starts_with_its_settings(
    alice: Any, two_models: Any
) -> None:
    browser = signed_in(alice)
    project = made_project(browser)
    assert (project.model_slug, project.system_prompt) == (
        "careful",
        "You are a ship's cook.\nAnswer briefly.",
    )

    opened = browser.post(reverse("project-conversation-new", args=[project.pk]))

    conversation = Conversation.objects.get(pk=opened.url.split("/")[-2])
    assert conversation.project == project
    assert (
        conversation.model_slug,
        conversation.system_prompt,
        conversation.temperature,
        conversation.max_tokens,
    ) == ("careful", "You are a ship's cook.\nAnswer briefly.", 0.3, 40)
    again = browser.post(reverse("project-conversation-new", args=[project.pk]))
    assert again.url == opened.url, "an untouched one is offered again"
    plain = browser.post(reverse("conversation-new"))
    assert plain.url != opened.url, "the plain New makes one outside the project"
    assert Conversation.objects.get(pk=plain.url.split("/")[-2]).project is None


def test_the_project_s_page_shows_its_settings_and_refuses_bad_ones(
    alice: Any, two_models: Any
) -> None:
    browser = signed_in(alice)
    project = made_project(browser)
    page = browser.get(project.get_absolute_url()).content.decode()
    assert "Cookbook" in page and "You are a ship&#x27;s cook." in page

    refused = browser.post(
        reverse("project-change", args=[project.pk]),
        {**FIELDS, "name": "Renamed", "temperature": "7"},
    )
    assert refused.status_code == 400
    assert "Careful takes a temperature from 0 to 2." in refused.content.decode()
    project.refresh_from_db()
    assert project.name == "Cookbook"
    assert browser.post(reverse("project-new"), {**FIELDS, "name": " "}).status_code == 400
    unknown = browser.post(reverse("project-new"), {**FIELDS, "model": "internal"})
    assert unknown.status_code == 400 and not Project.objects.filter(model_slug="internal")

    browser.post(reverse("project-change", args=[project.pk]), {**FIELDS, "name": "Galley"})
    project.refresh_from_db()
    assert project.name == "Galley"


def test_deleting_a_project_keeps_or_deletes_its_conversations_as_asked(alice: Any) -> None:
    browser = signed_in(alice)
    kept = Project.objects.create(owner=alice, name="Keep")
    gone = Project.objects.create(owner=alice, name="Gone")
    stays = Conversation.objects.create(owner=alice, title="stays", project=kept)
    goes = Conversation.objects.create(owner=alice, title="goes", project=gone)
    Message.objects.create(conversation=goes, role="user", content="bye")

    unasked = browser.post(reverse("project-delete", args=[kept.pk]))
    assert unasked.status_code == 400 and Project.objects.filter(pk=kept.pk).exists()
    browser.post(reverse("project-delete", args=[kept.pk]), {"conversations": "keep"})
    browser.post(reverse("project-delete", args=[gone.pk]), {"conversations": "delete"})

    assert not Project.objects.filter(owner=alice).exists()
    stays.refresh_from_db()
    assert stays.project is None
    assert not Conversation.objects.filter(pk=goes.pk).exists()
    assert not Message.objects.filter(content="bye").exists()


def test_strangers_get_404_for_a_project(alice: Any, charlie: Any) -> None:
    project = Project.objects.create(owner=alice, name="Private")
    browser = signed_in(charlie)
    assert browser.get(project.get_absolute_url()).status_code == 404
    for name in ("project-change", "project-conversation-new"):
        assert browser.post(reverse(name, args=[project.pk]), FIELDS).status_code == 404
    delete = reverse("project-delete", args=[project.pk])
    assert browser.post(delete, {"conversations": "delete"}).status_code == 404
    assert Project.objects.get(pk=project.pk).name == "Private"
    assert "Private" not in browser.get(reverse("conversation-list")).content.decode()
    assert Client().get(project.get_absolute_url()).status_code == 302


def test_a_project_is_shared_only_with_a_group_of_the_owner_s(alice: Any) -> None:
    theirs = Group.objects.create(name="someone else's")
    refused = signed_in(alice).post(reverse("project-new"), {"name": "X", "shared_with": theirs.pk})
    assert refused.status_code == 400 and not Project.objects.exists()


def test_a_group_member_reads_a_shared_project_and_cannot_write(
    alice: Any, users: dict[str, Any], charlie: Any
) -> None:
    bob = users["bob"]
    team = Group.objects.create(name="team")
    team.user_set.add(alice, bob)
    project = made_project(signed_in(alice), model="", shared_with=team.pk)
    conversation = Conversation.objects.create(owner=alice, title="Soup", project=project)
    Message.objects.create(conversation=conversation, role="user", content="Leek <b>soup</b>?")
    bobs = signed_in(bob)

    assert "Cookbook" in bobs.get(reverse("conversation-list")).content.decode()
    page = bobs.get(project.get_absolute_url()).content.decode()
    assert "read-only" in page and "Soup" in page and "Delete Cookbook" not in page
    read = reverse("project-conversation-read", args=[project.pk, conversation.pk])
    transcript = bobs.get(read).content.decode()
    assert "Leek &lt;b&gt;soup&lt;/b&gt;?" in transcript and "send-form" not in transcript
    assert bobs.get(conversation.get_absolute_url()).status_code == 404, "no composer for bob"
    assert bobs.post(reverse("project-change", args=[project.pk]), FIELDS).status_code == 404
    assert bobs.post(reverse("project-conversation-new", args=[project.pk])).status_code == 404
    pin = reverse("conversation-pin", args=[conversation.pk])
    assert bobs.post(pin, {"value": "1"}).status_code == 404
    assert signed_in(charlie).get(read).status_code == 404
    # Unshared, it is alice's alone again.
    Project.objects.filter(pk=project.pk).update(shared_with=None)
    assert bobs.get(read).status_code == 404


@pytest.mark.django_db(transaction=True)
async def test_the_engine_receives_the_project_s_model_prompt_and_sampling(
    connect: Any, alice: Any, two_models: Any
) -> None:
    project = await database_sync_to_async(Project.objects.create)(
        owner=alice,
        name="French",
        model_slug="careful",
        system_prompt="Reply in French.",
        temperature=0.4,
        max_tokens=5,
    )
    conversation = await database_sync_to_async(_create_in)(alice, project)
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="Bonjour")
    reply = (await socket.receive_until(finished))[-1]["message"]

    seen = get_engine(two_models["careful"]).records[reply["request_id"]]  # type: ignore[attr-defined]
    assert seen.messages == [
        ChatMessage("system", "Reply in French."),
        ChatMessage("user", "Bonjour"),
    ]
    assert (seen.params.temperature, seen.params.max_tokens) == (0.4, 5)
    assert reply["model_slug"] == "careful"


@pytest.mark.django_db(transaction=True)
async def test_a_group_member_s_socket_is_refused(
    connect: Any, alice: Any, users: dict[str, Any]
) -> None:
    bob = users["bob"]
    project = await database_sync_to_async(_shared_project)(alice, bob)
    conversation = await database_sync_to_async(_create_in)(alice, project)
    socket, _, _ = await connect(bob, conversation.pk)
    output = await socket.communicator.receive_output(timeout=2)
    assert output == {"type": "websocket.close", "code": 4403}


def _create_in(owner: Any, project: Project) -> Conversation:
    return conversation_create(owner=owner, project=project)


def _shared_project(owner: Any, member: Any) -> Project:
    team = Group.objects.create(name="team")
    team.user_set.add(owner, member)
    return Project.objects.create(owner=owner, name="Shared", shared_with=team)

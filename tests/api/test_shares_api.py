"""Share links through the REST API: create, list and revoke, for the owner only."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from django.apps import apps
from django.test import Client

from conversations.models import Conversation, ShareLink, ShareSnapshot
from conversations.services import shares as share_service
from tests.support.history import add_exchange


def shares(conversation: Conversation) -> str:
    return f"/api/conversations/{conversation.pk}/shares/"


def one_share(conversation: Conversation, share_id: int) -> str:
    return f"{shares(conversation)}{share_id}/"


def test_it_creates_a_link_with_its_absolute_url_once(api: Client, history: Conversation) -> None:
    response = api.post(shares(history))

    assert response.status_code == 201
    body = response.json()
    assert set(body) == {
        "url",
        "id",
        "title",
        "message_count",
        "created_at",
        "revoked_at",
        "is_active",
    }
    assert body["url"].startswith("http://testserver/s/")
    token = body["url"].rstrip("/").rsplit("/", 1)[1]
    share = ShareLink.objects.get(pk=body["id"])
    assert share.token_hash == hashlib.sha256(token.encode()).hexdigest()
    assert body["message_count"] == 6 and body["title"] == "Alice's chat"
    # The token is in that answer only: the list does not show it again.
    listed = api.get(shares(history))
    assert listed.status_code == 200
    assert token not in listed.content.decode()
    assert [s["id"] for s in listed.json()] == [body["id"]]
    assert "url" not in listed.json()[0]

    # Anyone with the URL reads the snapshot.
    page = Client().get(body["url"])
    assert page.status_code == 200
    assert "What is a socket?" in page.content.decode()


def test_it_lists_the_conversation_s_links_newest_first(
    api: Client, history: Conversation, alice: Any
) -> None:
    first = api.post(shares(history)).json()["id"]
    second = api.post(shares(history)).json()["id"]
    other = Conversation.objects.create(owner=alice, title="Other")
    api.post(shares(other))

    assert [s["id"] for s in api.get(shares(history)).json()] == [second, first]


def test_the_snapshot_keeps_what_was_there_when_it_was_made(
    api: Client, history: Conversation
) -> None:
    url = api.post(shares(history)).json()["url"]
    add_exchange(history, "Something said later", content="A later reply")

    page = Client().get(url).content.decode()
    assert "Tell me a long story" in page
    assert "Something said later" not in page and "A later reply" not in page


def test_delete_revokes_it_at_once(api: Client, history: Conversation) -> None:
    created = api.post(shares(history)).json()
    assert Client().get(created["url"]).status_code == 200

    response = api.delete(one_share(history, created["id"]))
    assert response.status_code == 204
    assert Client().get(created["url"]).status_code == 404
    listed = api.get(shares(history)).json()
    assert listed[0]["is_active"] is False and listed[0]["revoked_at"] is not None
    # Again: nothing changes, the first revocation time stays.
    assert api.delete(one_share(history, created["id"])).status_code == 204
    assert api.get(shares(history)).json()[0]["revoked_at"] == listed[0]["revoked_at"]


def test_a_stranger_cannot_list_create_or_revoke(
    api: Client, charlie_api: Client, history: Conversation
) -> None:
    created = api.post(shares(history)).json()

    assert charlie_api.get(shares(history)).status_code == 404
    assert charlie_api.post(shares(history)).status_code == 404
    assert charlie_api.delete(one_share(history, created["id"])).status_code == 404
    assert ShareLink.objects.count() == 1
    assert Client().get(created["url"]).status_code == 200


def test_a_link_is_revoked_under_its_own_conversation_only(
    api: Client, history: Conversation, alice: Any
) -> None:
    created = api.post(shares(history)).json()
    other = Conversation.objects.create(owner=alice, title="Other")

    assert api.delete(one_share(other, created["id"])).status_code == 404
    assert api.delete(one_share(history, 999_999)).status_code == 404
    assert Client().get(created["url"]).status_code == 200


def test_finding_9_links_past_the_per_user_limit_are_refused(
    api: Client, charlie_api: Client, history: Conversation, alice: Any, charlie: Any, settings: Any
) -> None:
    settings.CHAT_SHARES_PER_USER = 2
    other = Conversation.objects.create(owner=alice, title="Other")
    first = api.post(shares(history)).json()
    assert api.post(shares(other)).status_code == 201  # the limit is the user's, not per chat

    refused = api.post(shares(history))

    assert refused.status_code == 429
    assert refused["Content-Type"] == "application/json"
    assert refused.json()["code"] == "too_many_shares"
    assert "2 live share links" in refused.json()["detail"]
    assert ShareLink.objects.count() == 2
    # It counts live links: revoking one makes room for another.
    assert api.delete(one_share(history, first["id"])).status_code == 204
    assert api.post(shares(history)).status_code == 201
    # charlie's links are counted apart from alice's.
    charlies = Conversation.objects.create(owner=charlie, title="Charlie's")
    assert charlie_api.post(shares(charlies)).status_code == 201


def rows_holding(text: str) -> int:
    """The rows of the share models (whatever they are) that hold this text: its stored copies."""
    models = [
        model
        for model in apps.get_app_config("conversations").get_models()
        if model.__name__.startswith("Share")
    ]
    return sum(text in str(row) for model in models for row in model._default_manager.values_list())


def test_finding_9_links_to_one_branch_state_store_its_messages_once(
    api: Client, history: Conversation
) -> None:
    reply = "A reply worth sharing. " * 500
    add_exchange(history, "Write at length", content=reply)

    created = [api.post(shares(history)).json() for _ in range(5)]

    assert rows_holding(reply) == 1
    assert {c["message_count"] for c in created} == {8}
    for link in created:
        assert reply.strip() in Client().get(link["url"]).content.decode()
    # A new state of the branch is a new snapshot; the old one stays for the links that show it.
    add_exchange(history, "One more", content="A later reply")
    later = api.post(shares(history)).json()
    assert rows_holding(reply) == 2 and later["message_count"] == 10
    assert "A later reply" not in Client().get(created[0]["url"]).content.decode()


def test_it_needs_a_signed_in_caller(history: Conversation) -> None:
    anonymous = Client()
    assert anonymous.get(shares(history)).status_code == 401
    assert anonymous.post(shares(history)).status_code == 401
    assert anonymous.delete(one_share(history, 1)).status_code == 401


def test_finding_9_a_snapshot_stored_meanwhile_by_another_link_is_shared_not_a_500(
    api: Client, history: Conversation, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two links made at the same moment on SQLite (no row locks): the second's lookup found no
    snapshot, then its insert lost to the first's. It uses the first's."""
    first = api.post(shares(history)).json()
    monkeypatch.setattr(share_service, "_stored_snapshot_id", lambda conversation, digest: None)
    second = api.post(shares(history))
    assert second.status_code == 201, second.content
    assert ShareSnapshot.objects.count() == 1
    assert Client().get(second.json()["url"]).status_code == 200
    assert first["message_count"] == second.json()["message_count"]

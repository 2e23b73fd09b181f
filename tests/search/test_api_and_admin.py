"""The API's ?q= and the admin's search box are the page's search (conversations.search)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from conversations.services.tokens import api_token_create
from tests.search.chats import chat

pytestmark = pytest.mark.django_db

LIST = reverse("api-conversation-list")
CHANGELIST = reverse("admin:conversations_conversation_changelist")


def api_client(user: Any) -> Client:
    return Client(headers={"Authorization": f"Bearer {api_token_create(user=user, name='t')[1]}"})


def titles(response: Any) -> list[str]:
    assert response.status_code == 200, response.content
    return [c["title"] for c in response.json()["results"]]


def test_the_api_finds_what_the_page_finds_newest_first(alice: Any) -> None:
    older = chat(alice, "Cluster notes", "kubernetes upgrade")
    newer = chat(alice, "Kubernetes", "hello")
    chat(alice, "Unrelated", "nothing")
    newer.save()  # the most recently active: the list's order stands with ?q=

    found = titles(api_client(alice).get(LIST, {"q": "kubern"}))

    assert found == [newer.title, older.title]


def test_the_api_never_matches_another_users_text(
    alice: Any, users: dict[str, Any], charlie: Any
) -> None:
    chat(alice, "Alice's plans", "the zeppelin leaves at noon")
    chat(users["bob"], "Bob's", "zeppelin")

    assert titles(api_client(charlie).get(LIST, {"q": "zeppelin"})) == []
    assert titles(api_client(alice).get(LIST, {"q": "zeppelin"})) == ["Alice's plans"]
    export = api_client(charlie).get(reverse("api-export-jsonl"), {"q": "zeppelin"})
    assert export.status_code == 200 and export.content == b""


def test_the_api_lists_a_conversation_once_however_many_messages_match(alice: Any) -> None:
    chat(alice, "zeppelin talk", "zeppelin", "zeppelin again", "more zeppelin")
    response = api_client(alice).get(LIST, {"q": "zeppelin"})
    assert titles(response) == ["zeppelin talk"]
    assert response.json()["count"] == 1


@pytest.fixture
def superuser(db: Any) -> Client:
    from django.contrib.auth import get_user_model

    client = Client()
    client.force_login(get_user_model().objects.create_superuser("root", "r@example.com", "pw"))
    return client


def test_the_admin_matches_each_conversation_by_its_own_messages(
    superuser: Client, alice: Any, charlie: Any
) -> None:
    chat(alice, "Alice's chat", "about sockets")
    chat(charlie, "Charlie's chat", "about zeppelins")

    def found(**params: Any) -> list[str]:
        response = superuser.get(CHANGELIST, params)
        assert response.status_code == 200
        return sorted(c.title for c in response.context["cl"].result_list)

    assert found(q="zeppelin") == ["Charlie's chat"]
    assert found(q="zeppelin", owner__id__exact=alice.pk) == []
    assert found(q="sockets") == ["Alice's chat"]
    assert found(q="chat") == ["Alice's chat", "Charlie's chat"]  # titles

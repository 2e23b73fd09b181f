"""Read-only share links in the pages: the owner's list, the public snapshot, revoking, the admin."""

from __future__ import annotations

import hashlib
import re
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from conversations.models import Conversation, Message, ShareLink, ShareSnapshot
from conversations.services.branches import branch_select, link_as_a_line
from conversations.services.shares import share_create, share_for_token, share_revoke
from tests.support.history import add_exchange

SCRIPT_REPLY = "Here: <script>alert('owned')</script> and **bold**"


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def shares_url(conversation: Conversation) -> str:
    return reverse("conversation-shares", kwargs={"conversation_id": conversation.pk})


def revoke_url(share: ShareLink) -> str:
    return reverse(
        "conversation-share-revoke",
        kwargs={"conversation_id": share.conversation_id, "share_id": share.pk},
    )


def share_path(token: str) -> str:
    return reverse("share-view", kwargs={"token": token})


@pytest.fixture
def chat(conversation: Conversation, users: dict[str, Any]) -> Conversation:
    """alice's conversation with a plain reply and one holding a script; bob has his own."""
    add_exchange(conversation, "What is a socket?", content="An **endpoint** of a connection.")
    add_exchange(conversation, "Show me a script", content=SCRIPT_REPLY)
    bobs = Conversation.objects.create(owner=users["bob"], title="Bob's secret recipes")
    add_exchange(bobs, "Pancakes?", content="Flour and eggs.")
    return conversation


def create_via_page(conversation: Conversation, owner: Any) -> tuple[str, ShareLink]:
    """The owner presses "Create share link"; the page shows the new link once."""
    response = client_for(owner).post(shares_url(conversation))
    assert response.status_code == 200
    page = response.content.decode()
    match = re.search(r'value="(http://testserver/s/([\w-]+)/)"', page)
    assert match, page
    return match.group(1), ShareLink.objects.get(pk=response.context["created"].pk)


def test_it_creates_a_link_shown_once_and_stores_only_its_hash(
    chat: Conversation, alice: Any
) -> None:
    url, share = create_via_page(chat, alice)
    token = url.rstrip("/").rsplit("/", 1)[1]

    assert len(token) >= 43  # 32 random bytes
    assert share.token_hash == hashlib.sha256(token.encode()).hexdigest()
    stored = ShareLink.objects.filter(pk=share.pk).values().get()
    assert not any(token in str(value) for value in stored.values())
    assert share.created_by == alice and share.conversation == chat
    # The list shows the link without its URL: it cannot be shown again.
    listing = client_for(alice).get(shares_url(chat))
    assert listing.status_code == 200
    assert f'id="share-link-{share.pk}"' in listing.content.decode()
    assert token not in listing.content.decode()
    assert "no-cache" in listing["Cache-Control"]


def test_anyone_with_the_link_reads_the_snapshot_sanitized(chat: Conversation) -> None:
    _, token = share_create(conversation=chat, created_by=chat.owner)
    response = Client().get(share_path(token))

    assert response.status_code == 200
    page = response.content.decode()
    assert "Alice&#x27;s chat" in page
    assert "What is a socket?" in page
    assert "<strong>endpoint</strong>" in page  # replies are rendered Markdown
    assert "<script>alert" not in page  # ...sanitized: the script is text, never a tag
    assert "&lt;script&gt;alert('owned')&lt;/script&gt;" in page
    assert response["Cache-Control"] == "private, no-store"
    assert response["X-Robots-Tag"] == "noindex"
    assert response["Referrer-Policy"] == "no-referrer"  # links in replies get no token


def test_the_snapshot_shows_nothing_else(chat: Conversation, alice: Any) -> None:
    _, token = share_create(conversation=chat, created_by=alice)
    page = Client().get(share_path(token)).content.decode()

    assert "alice" not in page.lower().replace("alice&#x27;s chat", "")  # no owner name
    assert "Bob" not in page and "Pancakes" not in page  # no other conversation
    assert 'id="sidebar"' not in page and "conversation-list" not in page
    assert "ws-connect" not in page and "send-form" not in page and "<textarea" not in page
    assert str(chat.pk) not in page  # no ids
    for message in Message.objects.filter(conversation=chat):
        assert f"msg-{message.pk}" not in page


def test_later_messages_and_renames_are_not_in_the_snapshot(chat: Conversation) -> None:
    _, token = share_create(conversation=chat, created_by=chat.owner)
    add_exchange(chat, "A later question", content="A later answer")
    chat.title = "Renamed since"
    chat.save()

    page = Client().get(share_path(token)).content.decode()
    assert "What is a socket?" in page
    assert "A later question" not in page and "A later answer" not in page
    assert "Renamed since" not in page


def test_the_snapshot_holds_the_branch_shown_only(chat: Conversation) -> None:
    """Of a regenerated turn, only the version shown when the link was made."""
    link_as_a_line(chat.pk)  # add_exchange writes a plain list; a turn's versions need a tree
    first = Message.objects.filter(conversation=chat, role="assistant").order_by("pk").first()
    assert first is not None and first.parent is not None
    other = Message.objects.create(
        conversation=chat, parent=first.parent, role="assistant", content="Another version"
    )
    branch_select(conversation=chat, message_id=other.pk)
    chat.refresh_from_db()

    share, token = share_create(conversation=chat, created_by=chat.owner)
    assert share.snapshot is not None
    stored = share.snapshot.messages
    assert [m["content"] for m in stored] == ["What is a socket?", "Another version"]
    assert set(stored[0]) == {
        "role",
        "content",
        "created_at",
        "model_slug",
        "model_name",
        "status",
        "finish_reason",
    }
    page = Client().get(share_path(token)).content.decode()
    assert "Another version" in page and "Show me a script" not in page


def test_revoking_makes_it_404_at_once(chat: Conversation, alice: Any) -> None:
    url, share = create_via_page(chat, alice)
    anonymous = Client()
    assert anonymous.get(url).status_code == 200

    response = client_for(alice).post(revoke_url(share))
    assert response.status_code == 302
    assert anonymous.get(url).status_code == 404
    share.refresh_from_db()
    assert share.revoked_at is not None
    listing = client_for(alice).get(shares_url(chat)).content.decode()
    assert "revoked" in listing


def test_finding_9_the_page_refuses_a_link_past_the_per_user_limit(
    chat: Conversation, alice: Any, settings: Any
) -> None:
    settings.CHAT_SHARES_PER_USER = 1
    create_via_page(chat, alice)

    response = client_for(alice).post(shares_url(chat))

    assert response.status_code == 429
    page = response.content.decode()
    assert 'role="alert"' in page and "1 live share link" in page and "Revoke" in page
    assert 'id="new-share-url"' not in page
    assert ShareLink.objects.count() == 1


def test_a_snapshot_goes_with_the_last_live_link_that_shows_it(
    chat: Conversation, alice: Any
) -> None:
    first, _ = share_create(conversation=chat, created_by=alice)
    second, _ = share_create(conversation=chat, created_by=alice)
    assert first.snapshot_id == second.snapshot_id and ShareSnapshot.objects.count() == 1

    share_revoke(share=first)
    assert ShareSnapshot.objects.count() == 1  # the second link still shows it
    share_revoke(share=second)
    assert not ShareSnapshot.objects.exists()

    # Revoked links stay listed with what they showed, not with its text.
    second.refresh_from_db()
    assert second.snapshot is None and second.message_count == 4
    listing = client_for(alice).get(shares_url(chat)).content.decode()
    assert listing.count("<td>4</td>") == 2
    # A new link to the same state stores it again.
    _, token = share_create(conversation=chat, created_by=alice)
    assert ShareSnapshot.objects.count() == 1
    assert "What is a socket?" in Client().get(share_path(token)).content.decode()


def test_an_unknown_token_is_404(db: Any) -> None:
    assert Client().get(share_path("not-a-real-token")).status_code == 404
    assert Client().get(share_path("x" * 500)).status_code == 404
    assert share_for_token("") is None


def test_a_stranger_cannot_list_create_or_revoke(
    chat: Conversation, alice: Any, charlie: Any
) -> None:
    share, _ = share_create(conversation=chat, created_by=alice)
    stranger = client_for(charlie)

    assert stranger.get(shares_url(chat)).status_code == 404
    assert stranger.post(shares_url(chat)).status_code == 404
    assert stranger.post(revoke_url(share)).status_code == 404
    assert ShareLink.objects.count() == 1
    share.refresh_from_db()
    assert share.revoked_at is None
    # A signed-out visitor is sent to the login page to manage links.
    assert Client().get(shares_url(chat)).status_code == 302
    assert Client().post(revoke_url(share)).status_code == 302


def test_revoking_needs_the_conversation_it_belongs_to(chat: Conversation, alice: Any) -> None:
    share, _ = share_create(conversation=chat, created_by=alice)
    elsewhere = Conversation.objects.create(owner=alice, title="Another")
    url = reverse(
        "conversation-share-revoke", kwargs={"conversation_id": elsewhere.pk, "share_id": share.pk}
    )
    assert client_for(alice).post(url).status_code == 404


def test_forms_need_their_csrf_token(chat: Conversation, alice: Any) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    assert client.post(shares_url(chat)).status_code == 403
    share, _ = share_create(conversation=chat, created_by=alice)
    assert client.post(revoke_url(share)).status_code == 403


def test_a_setting_makes_the_link_require_login(
    chat: Conversation, charlie: Any, settings: Any
) -> None:
    settings.CHAT_SHARES_REQUIRE_LOGIN = True
    _, token = share_create(conversation=chat, created_by=chat.owner)

    response = Client().get(share_path(token))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))
    # Any signed-in user with the link reads it, not only its owner.
    assert client_for(charlie).get(share_path(token)).status_code == 200
    # ...and a signed-out visitor cannot tell a real token from a made-up one.
    assert Client().get(share_path("made-up")).status_code == 302


@pytest.fixture
def superuser(db: Any) -> Client:
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("root", "r@example.com", "pw"))
    return client


def test_the_admin_lists_links_and_revokes_them(
    chat: Conversation, alice: Any, superuser: Client
) -> None:
    share, token = share_create(conversation=chat, created_by=alice)
    changelist = reverse("admin:conversations_sharelink_changelist")

    response = superuser.get(changelist)
    assert response.status_code == 200
    assert [s.pk for s in response.context["cl"].result_list] == [share.pk]
    assert "Alice&#x27;s chat" in response.content.decode()
    assert superuser.get(reverse("admin:conversations_sharelink_add")).status_code == 403
    change = reverse("admin:conversations_sharelink_change", args=[share.pk])
    assert token not in superuser.get(change).content.decode()

    response = superuser.post(
        changelist, {"action": "revoke", "_selected_action": [share.pk]}, follow=True
    )
    assert response.status_code == 200
    assert "1 link revoked." in response.content.decode()
    assert Client().get(share_path(token)).status_code == 404

"""Temporary chat, the page side: started beside New conversation, shown as such, its own."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from conversations.models import Conversation, Message

pytestmark = [pytest.mark.django_db]


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_it_starts_a_temporary_chat_and_new_conversation_a_plain_one(alice: Any) -> None:
    browser = client_for(alice)
    temporary = browser.post(reverse("conversation-new"), {"temporary": "1"})
    plain = browser.post(reverse("conversation-new"))

    chat = Conversation.objects.get(pk=temporary.url.split("/")[-2])
    assert chat.temporary and chat.owner == alice
    assert not Conversation.objects.get(pk=plain.url.split("/")[-2]).temporary
    # Each reuses an untouched one of its own kind, not the other's.
    assert browser.post(reverse("conversation-new"), {"temporary": "1"}).url == temporary.url
    assert browser.post(reverse("conversation-new")).url == plain.url
    assert Conversation.objects.filter(owner=alice).count() == 2


def test_it_is_shown_as_temporary_in_the_page_and_the_sidebar(alice: Any) -> None:
    chat = Conversation.objects.create(owner=alice, title="Passing <b>thought</b>", temporary=True)
    Message.objects.create(conversation=chat, role="user", content="hi")
    plain = Conversation.objects.create(owner=alice, title="Kept")
    Message.objects.create(conversation=plain, role="user", content="hi")
    browser = client_for(alice)

    page = browser.get(chat.get_absolute_url()).content.decode()
    assert 'id="temporary-note"' in page
    assert "Passing &lt;b&gt;thought&lt;/b&gt;" in page
    assert page.count('class="badge temporary"') == 2  # the header's, and its sidebar entry's
    other = browser.get(plain.get_absolute_url()).content.decode()
    assert 'id="temporary-note"' not in other
    assert other.count('class="badge temporary"') == 1  # the temporary chat's sidebar entry
    assert 'name="temporary" value="1"' in other  # the Temporary chat button


def test_a_stranger_gets_404_for_a_temporary_chat(alice: Any, charlie: Any) -> None:
    chat = Conversation.objects.create(owner=alice, temporary=True)
    assert client_for(charlie).get(chat.get_absolute_url()).status_code == 404


def test_the_form_needs_its_csrf_token(alice: Any) -> None:
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(alice)
    assert browser.post(reverse("conversation-new"), {"temporary": "1"}).status_code == 403
    assert not Conversation.objects.exists()

"""The chat page's everyday parts, server side: the theme remembered per user, headings and labels,
per-message details (also as re-rendered from a `finished` event), Copy's raw Markdown, the
composer's limit without silent truncation, and a new conversation's empty state."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from conversations.events.payloads import message_payload
from conversations.models import Conversation, Message, UserPreferences
from conversations.sockets.html_renderer import HtmlRenderer

pytestmark = [pytest.mark.django_db]


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def html_theme(page: str) -> str:
    match = re.search(r'<html lang="en" data-theme="(\w+)">', page)
    assert match, "the page renders no theme on <html>"
    return match.group(1)


def finished_reply(conversation: Conversation, **fields: Any) -> Message:
    start = timezone.now() - timedelta(seconds=10)
    fields.setdefault("status", Message.Status.COMPLETE)
    reply = Message.objects.create(
        conversation=conversation,
        role="assistant",
        content="Here:\n\n```python\nprint('<hi>')\n```\n",
        engine="scripted",
        model="scripted-1",
        model_slug="scripted",
        completion_tokens=120,
        **fields,
    )
    # created_at is auto_now_add: set the timeline afterwards.
    Message.objects.filter(pk=reply.pk).update(
        created_at=start,
        engine_ready_at=start,
        first_token_at=start + timedelta(milliseconds=250),
        finished_at=start + timedelta(milliseconds=250, seconds=3),
    )
    reply.refresh_from_db()
    return reply


def test_it_renders_the_system_theme_until_the_user_picks_one(alice: Any) -> None:
    client = client_for(alice)
    assert html_theme(client.get(reverse("conversation-list")).content.decode()) == "system"

    response = client.post(reverse("theme"), {"theme": "dark", "next": "/"})
    assert response.status_code == 302 and response["Location"] == "/"
    assert UserPreferences.objects.get(user=alice).theme == "dark"
    conversation = Conversation.objects.create(owner=alice)
    for url in (reverse("conversation-list"), conversation.get_absolute_url()):
        page = client.get(url).content.decode()
        assert html_theme(page) == "dark"
        assert '<option value="dark" selected>' in page

    # htmx (the page's select) gets a 204: the page already shows it.
    response = client.post(reverse("theme"), {"theme": "light"}, headers={"HX-Request": "true"})
    assert response.status_code == 204
    assert UserPreferences.objects.get(user=alice).theme == "light"


def test_the_theme_is_each_user_s_own(alice: Any, charlie: Any) -> None:
    client_for(alice).post(reverse("theme"), {"theme": "dark"})
    charlie_client = client_for(charlie)
    assert html_theme(charlie_client.get(reverse("conversation-list")).content.decode()) == "system"
    charlie_client.post(reverse("theme"), {"theme": "light"})
    assert UserPreferences.objects.get(user=alice).theme == "dark"
    assert UserPreferences.objects.get(user=charlie).theme == "light"


def test_the_theme_view_refuses_bad_values_strangers_and_gets(alice: Any) -> None:
    client = client_for(alice)
    assert client.post(reverse("theme"), {"theme": "neon"}).status_code == 400
    assert client.get(reverse("theme")).status_code == 405
    anonymous = Client().post(reverse("theme"), {"theme": "dark"})
    assert anonymous.status_code == 302 and anonymous["Location"].startswith(reverse("login"))
    assert not UserPreferences.objects.exists()
    # An address elsewhere is not followed back.
    response = client.post(reverse("theme"), {"theme": "dark", "next": "https://evil.example/"})
    assert response["Location"] == reverse("conversation-list")


def test_the_chat_page_has_headings_a_skip_link_and_no_silent_truncation(
    alice: Any, conversation: Conversation
) -> None:
    page = client_for(alice).get(conversation.get_absolute_url()).content.decode()
    assert '<h1 id="conversation-heading" class="chat-title">Alice&#x27;s chat</h1>' in page
    assert '<h2 id="messages-heading"' in page
    assert '<a class="skip-link" href="#conversation">' in page and 'id="conversation"' in page
    textarea = re.search(r"<textarea id=\"message-box\"[^>]*>", page)
    assert textarea is not None
    assert "maxlength" not in textarea.group(0), "maxlength cuts a long paste silently"
    assert 'data-max-chars="8000"' in textarea.group(0)
    assert '<dialog id="shortcuts-dialog"' in page and 'aria-controls="sidebar"' in page


def test_a_new_conversation_shows_its_model_and_example_prompts(
    alice: Any, conversation: Conversation, two_models: Any
) -> None:
    page = client_for(alice).get(conversation.get_absolute_url()).content.decode()
    assert '<strong class="model-answering">Quick</strong> answers in this conversation' in page
    assert page.count('class="example-prompt"') == 4

    Message.objects.create(conversation=conversation, role="user", content="hi")
    page = client_for(alice).get(conversation.get_absolute_url()).content.decode()
    assert "example-prompt" not in page


def test_a_reply_shows_its_details_and_copies_its_raw_markdown(
    alice: Any, conversation: Conversation
) -> None:
    finished_reply(conversation)
    page = client_for(alice).get(conversation.get_absolute_url()).content.decode()
    assert "Model scripted-1" in page
    assert "First token after 250 ms" in page
    assert "40.0 tokens/s" in page
    assert "120 tokens" in page
    assert '<time datetime="' in page
    # The Copy button's text: the reply's Markdown, escaped inside an inert <template>.
    assert (
        '<template class="raw-markdown">Here:\n\n```python\nprint(&#x27;&lt;hi&gt;&#x27;)\n```\n'
        "</template>"
    ) in page
    assert 'data-copy="message"' in page


def test_a_reply_re_rendered_from_its_finished_event_shows_the_same_details(
    alice: Any, conversation: Conversation
) -> None:
    reply = finished_reply(conversation, cancelled_by="alice", status=Message.Status.CANCELLED)
    (fragment,) = HtmlRenderer(conversation.pk, frame_bytes=512 * 1024).finished(
        message_payload(reply)
    )
    assert "First token after 250 ms" in fragment
    assert "40.0 tokens/s" in fragment
    assert "Stopped by alice after 120 tokens" in fragment
    assert "Model scripted-1" in fragment
    assert f'<time datetime="{reply.created_at.isoformat()}"' in fragment


def test_a_stranger_sees_neither_the_details_nor_the_markdown(
    charlie: Any, conversation: Conversation
) -> None:
    finished_reply(conversation)
    response = client_for(charlie).get(conversation.get_absolute_url())
    assert response.status_code == 404
    assert "raw-markdown" not in response.content.decode()

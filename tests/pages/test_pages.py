"""Pages: login required, a stranger gets 404, the chat page shows history."""

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


def test_it_requires_login_on_every_page(conversation: Conversation) -> None:
    client = Client()
    for url in (reverse("conversation-list"), conversation.get_absolute_url()):
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("login"))
    response = client.post(reverse("conversation-new"))
    assert (
        response.status_code == 302
        and not Conversation.objects.exclude(pk=conversation.pk).exists()
    )


def test_a_stranger_gets_404_on_alice_s_conversation(
    charlie: Any, conversation: Conversation
) -> None:
    client = client_for(charlie)
    assert client.get(conversation.get_absolute_url()).status_code == 404
    assert "Alice" not in client.get(reverse("conversation-list")).content.decode()


def test_it_shows_history_escaped_and_markdown_sanitized(
    alice: Any, conversation: Conversation
) -> None:
    Message.objects.create(
        conversation=conversation, role="user", content="<script>alert(1)</script>"
    )
    Message.objects.create(
        conversation=conversation,
        role="assistant",
        content="**bold** <img src=x onerror=alert(1)> [link](javascript:alert(1))",
        status=Message.Status.COMPLETE,
    )
    Message.objects.create(
        conversation=conversation, role="assistant", content="half", status=Message.Status.CANCELLED
    )
    page = client_for(alice).get(conversation.get_absolute_url()).content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<script>alert(1)" not in page
    assert "<strong>bold</strong>" in page
    assert "<img src" not in page and 'href="javascript' not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "Stopped" in page


def test_a_new_conversation_belongs_to_its_creator(alice: Any) -> None:
    response = client_for(alice).post(reverse("conversation-new"))
    conversation = Conversation.objects.get(owner=alice)
    assert response["Location"] == conversation.get_absolute_url()


def test_the_page_serves_htmx_locally_and_connects_its_socket(
    alice: Any, conversation: Conversation
) -> None:
    page = client_for(alice).get(conversation.get_absolute_url()).content.decode()
    assert f'ws-connect="/ws/conversations/{conversation.pk}/"' in page
    assert "/static/django_htmx/htmx-2" in page and "hx-ws-2" in page
    assert "https://" not in page, "no CDN"


@pytest.mark.parametrize(
    ("origin", "detail", "note"),
    [
        ("import", "chatgpt", "Imported from ChatGPT"),
        ("import", "claude", "Imported from Claude"),
        ("api", "OpenAI/Python 1.52.0", "Through the API (OpenAI/Python 1.52.0)"),
        ("api", "<script>x</script>", "Through the API (&lt;script&gt;x&lt;/script&gt;)"),
        ("api", "", "Through the API"),
    ],
)
def test_the_header_says_where_a_conversation_came_from(
    alice: Any, origin: str, detail: str, note: str
) -> None:
    conversation = Conversation.objects.create(owner=alice, origin=origin, origin_detail=detail)
    client = Client()
    client.force_login(alice)

    html = client.get(conversation.get_absolute_url()).content.decode()

    assert f'<p class="origin-note">{note}</p>' in html


def test_a_conversation_started_here_has_no_origin_note(alice: Any) -> None:
    conversation = Conversation.objects.create(owner=alice)
    client = Client()
    client.force_login(alice)
    assert "origin-note" not in client.get(conversation.get_absolute_url()).content.decode()

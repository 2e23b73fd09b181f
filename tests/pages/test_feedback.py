"""Thumbs up and down on a reply from its chat page: saved by the footer's htmx posts, shown again
on reload, its owner's alone."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from conversations.models import Conversation, Feedback, Message
from conversations.models.feedback import MAX_REASON
from tests.support.feedback import two_replies


@pytest.fixture
def replies(conversation: Conversation) -> list[Message]:
    return two_replies(conversation)


@pytest.fixture
def alice_client(alice: Any) -> Client:
    client = Client()
    client.force_login(alice)
    return client


def rate(client: Client, reply: Message, **data: str) -> Any:
    return client.post(reverse("message-feedback", args=[reply.pk]), data, HTTP_HX_REQUEST="true")


def test_it_saves_a_thumbs_down_and_its_reason_and_shows_them_on_reload(
    alice_client: Client, conversation: Conversation, replies: list[Message]
) -> None:
    reply = replies[0]
    asked = rate(alice_client, reply, rating="down")
    assert asked.status_code == 200
    fragment = asked.content.decode()
    # The thumbs-down is pressed and asks why, its field taking the focus.
    assert 'class="rate rate-down"' in fragment and 'aria-pressed="true"' in fragment
    assert f'id="msg-{reply.pk}-reason"' in fragment and "autofocus" in fragment

    saved = rate(alice_client, reply, rating="down", reason="  Too vague <b>really</b>  ")
    assert saved.status_code == 200 and "Reason saved." in saved.content.decode()
    feedback = Feedback.objects.get(message=reply)
    assert (feedback.owner, feedback.rating, feedback.reason) == (
        conversation.owner,
        "down",
        "Too vague <b>really</b>",
    )
    # What the reply was made with is kept with the rating.
    assert feedback.model_slug == "small"
    assert feedback.settings == {
        "engine": "scripted",
        "model": "scripted-1",
        "system_prompt": "Answer briefly.",
        "temperature": 0.3,
        "max_tokens": 200,
    }

    page = alice_client.get(conversation.get_absolute_url()).content.decode()
    rated = page[page.index(f'id="msg-{reply.pk}-feedback"') :]
    rated = rated[: rated.index("</span>\n")]
    assert 'data-rating="down"' in rated
    assert "Too vague &lt;b&gt;really&lt;/b&gt;</textarea>" in rated  # escaped, never markup
    assert "autofocus" not in rated  # a reload leaves the focus in the composer
    other = page[page.index(f'id="msg-{replies[1].pk}-feedback"') :]
    assert (
        other.startswith(f'id="msg-{replies[1].pk}-feedback"') and 'data-rating=""' in other[:200]
    )


def test_rating_it_again_replaces_the_rating_and_the_pressed_one_takes_it_back(
    alice_client: Client, replies: list[Message]
) -> None:
    reply = replies[1]
    rate(alice_client, reply, rating="down", reason="Wrong port")
    rate(alice_client, reply, rating="up")
    feedback = Feedback.objects.get(message=reply)
    assert (feedback.rating, feedback.reason) == ("up", "")
    assert Feedback.objects.count() == 1

    # The pressed thumbs-up posts an empty rating: the rating is taken back.
    fragment = rate(alice_client, reply, rating="up").content.decode()
    assert """hx-vals='{"rating": ""}'""" in fragment
    assert rate(alice_client, reply, rating="").status_code == 200
    assert not Feedback.objects.exists()


def test_it_refuses_a_rating_or_reason_it_cannot_keep(
    alice_client: Client, replies: list[Message]
) -> None:
    reply = replies[0]
    rate(alice_client, reply, rating="down", reason="Short")
    too_long = rate(alice_client, reply, rating="down", reason="x" * (MAX_REASON + 1))
    assert too_long.status_code == 400
    assert f"Keep the reason to {MAX_REASON} characters" in too_long.content.decode()
    assert 'role="alert"' in too_long.content.decode()
    assert rate(alice_client, reply, rating="meh").status_code == 400
    assert Feedback.objects.get(message=reply).reason == "Short"  # unchanged by either


def test_only_a_settled_reply_is_rated(
    alice_client: Client, conversation: Conversation, replies: list[Message]
) -> None:
    question = Message.objects.filter(conversation=conversation, role="user").first()
    assert question is not None
    assert rate(alice_client, question, rating="up").status_code == 404
    Message.objects.filter(pk=replies[1].pk).update(status="streaming")
    assert rate(alice_client, replies[1], rating="up").status_code == 400
    assert not Feedback.objects.exists()
    page = alice_client.get(conversation.get_absolute_url()).content.decode()
    assert f'id="msg-{replies[0].pk}-feedback"' in page
    assert f'id="msg-{replies[1].pk}-feedback"' not in page  # still being written


def test_charlie_cannot_rate_alice_s_reply(
    charlie: Any, alice_client: Client, replies: list[Message]
) -> None:
    rate(alice_client, replies[0], rating="up")
    stranger = Client()
    stranger.force_login(charlie)
    assert rate(stranger, replies[0], rating="down", reason="spite").status_code == 404
    assert rate(stranger, replies[1], rating="down").status_code == 404
    feedback = Feedback.objects.get()
    assert (feedback.message_id, feedback.rating) == (replies[0].pk, "up")
    anonymous = rate(Client(), replies[0], rating="down")
    assert anonymous.status_code == 302 and "/login/" in anonymous["Location"]


def test_a_rating_needs_the_csrf_token(alice: Any, replies: list[Message]) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    assert rate(client, replies[0], rating="up").status_code == 403
    assert not Feedback.objects.exists()

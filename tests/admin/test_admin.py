"""History review in the Django admin: read-only, for superusers and view-only reviewers."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from conversations.models import Conversation, Message
from tests.admin.conftest import staff

CHANGELIST = "admin:conversations_conversation_changelist"


def change_url(conversation: Conversation) -> str:
    return reverse("admin:conversations_conversation_change", args=[conversation.pk])


def transcript_url(conversation: Conversation) -> str:
    return reverse("admin:conversations_conversation_transcript", args=[conversation.pk])


def test_it_lists_conversations_with_their_stats(
    admin_client: Client, history: Conversation
) -> None:
    response = admin_client.get(reverse(CHANGELIST))

    assert response.status_code == 200
    rows = {c.pk: c for c in response.context["cl"].result_list}
    row = rows[history.pk]
    assert row.owner.username == "alice"
    assert row.message_count == 4
    assert row.last_status == "cancelled"
    assert row.last_engine == "scripted"
    assert row.last_model == "scripted-1"
    page = response.content.decode()
    assert "Alice&#x27;s chat" in page and "Bob&#x27;s recipes" in page
    assert transcript_url(history) in page


@pytest.mark.parametrize(
    "params, expected",
    [
        ({"q": "endpoint"}, ["Alice's chat"]),  # message text
        ({"q": "recipes"}, ["Bob's recipes"]),  # title
        ({"status": "cancelled"}, ["Alice's chat"]),
        ({"engine": "openai"}, ["Bob's recipes"]),
        ({"q": "saga", "engine": "scripted"}, ["Alice's chat"]),
        ({"q": "nothing like this"}, []),
    ],
)
def test_it_filters_and_searches(
    superuser: Client, history: Conversation, params: dict[str, str], expected: list[str]
) -> None:
    response = superuser.get(reverse(CHANGELIST), params)
    assert response.status_code == 200
    assert [c.title for c in response.context["cl"].result_list] == expected


def test_it_filters_by_owner(superuser: Client, history: Conversation, alice: Any) -> None:
    response = superuser.get(reverse(CHANGELIST), {"owner__id__exact": alice.pk})
    assert [c.title for c in response.context["cl"].result_list] == ["Alice's chat"]


def test_it_counts_messages_once_while_searching_message_text(
    superuser: Client, history: Conversation
) -> None:
    # "Tell me a saga" and "Long ago"... two messages match "a": the row and its count stay single.
    response = superuser.get(reverse(CHANGELIST), {"q": "a"})
    rows = [c for c in response.context["cl"].result_list if c.pk == history.pk]
    assert len(rows) == 1
    assert rows[0].message_count == 4


def test_it_shows_messages_in_order_with_metrics_and_stop_audit(
    admin_client: Client, history: Conversation
) -> None:
    response = admin_client.get(change_url(history))

    assert response.status_code == 200
    page = response.content.decode()
    positions = [
        page.index(text)
        for text in ("Explain sockets", "A socket is", "Tell me a saga", "Long ago")
    ]
    assert positions == sorted(positions)
    assert "Time to first token" in page and "80 ms" in page
    assert "Tokens per second" in page and "7.61" in page  # 7 tokens in 0.92 s
    assert "Engine-confirmed cancel latency" in page and "4.3 ms" in page
    assert "user alice" in page
    assert "7 tokens" in page
    assert transcript_url(history) in page


def test_it_offers_no_way_to_edit_a_transcript(admin_client: Client, history: Conversation) -> None:
    page = admin_client.get(change_url(history)).content.decode()
    assert 'name="_save"' not in page
    assert "<textarea" not in page
    assert 'name="messages-0-content"' not in page

    before = list(Message.objects.values_list("content", flat=True))
    response = admin_client.post(
        change_url(history), {"title": "rewritten", "messages-0-content": "rewritten"}
    )
    assert response.status_code == 403
    delete = reverse("admin:conversations_conversation_delete", args=[history.pk])
    assert admin_client.post(delete, {"post": "yes"}).status_code == 403
    add = reverse("admin:conversations_conversation_add")
    assert admin_client.get(add).status_code == 403
    history.refresh_from_db()
    assert history.title == "Alice's chat"
    assert list(Message.objects.values_list("content", flat=True)) == before


def test_it_shows_a_readable_transcript(admin_client: Client, history: Conversation) -> None:
    response = admin_client.get(transcript_url(history))

    assert response.status_code == 200
    page = response.content.decode()
    assert "Transcript: Alice&#x27;s chat" in page
    assert page.index("Explain sockets") < page.index("A socket is an endpoint.")
    assert "Stopped by alice after 7 tokens (engine confirmed in 4 ms)." in page


def test_it_downloads_a_transcript_as_markdown(superuser: Client, history: Conversation) -> None:
    response = superuser.get(transcript_url(history), {"download": "markdown"})

    assert response["Content-Disposition"] == 'attachment; filename="alices-chat.md"'
    text = response.content.decode()
    assert text.startswith("# Alice's chat")
    assert "> **Cancelled:** Stopped by alice" in text


def test_it_exports_selected_conversations_as_json(
    admin_client: Client, history: Conversation
) -> None:
    bobs = Conversation.objects.get(title="Bob's recipes")
    response = admin_client.post(
        reverse(CHANGELIST),
        {"action": "export_json", "_selected_action": [str(history.pk), str(bobs.pk)]},
    )

    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response["Content-Disposition"].startswith('attachment; filename="conversations-')
    exported = {c["id"]: c for c in json.loads(response.content)}
    assert set(exported) == {str(history.pk), str(bobs.pk)}
    alices = exported[str(history.pk)]
    assert alices["owner"] == "alice"
    assert [m["content"] for m in alices["messages"]] == list(
        history.messages.values_list("content", flat=True)
    )
    assert alices["messages"][3]["cancel_latency_ms"] == 4.25


def test_it_exports_selected_conversations_as_markdown(
    superuser: Client, history: Conversation
) -> None:
    response = superuser.post(
        reverse(CHANGELIST), {"action": "export_markdown", "_selected_action": [str(history.pk)]}
    )

    assert response["Content-Type"] == "text/markdown; charset=utf-8"
    text = response.content.decode()
    assert text.startswith("# Alice's chat")
    assert "Bob's recipes" not in text


def test_it_refuses_staff_without_the_review_permission(history: Conversation) -> None:
    client = staff("intern")

    assert client.get(reverse(CHANGELIST)).status_code == 403
    assert client.get(change_url(history)).status_code == 403
    assert client.get(transcript_url(history)).status_code == 403
    index = client.get(reverse("admin:index")).content.decode()
    assert "Conversations" not in index


def test_it_shows_reviewers_the_messages_without_message_permissions(
    reviewer: Client, history: Conversation
) -> None:
    page = reviewer.get(change_url(history)).content.decode()
    assert "A socket is an endpoint." in page


@pytest.mark.parametrize("url", ["changelist", "change", "transcript"])
def test_it_sends_a_plain_user_to_the_admin_login(
    charlie: Any, history: Conversation, url: str
) -> None:
    client = Client()
    client.force_login(charlie)
    target = {
        "changelist": reverse(CHANGELIST),
        "change": change_url(history),
        "transcript": transcript_url(history),
    }[url]

    response = client.get(target)

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))


def test_it_refuses_a_plain_user_the_export_action(charlie: Any, history: Conversation) -> None:
    client = Client()
    client.force_login(charlie)
    response = client.post(
        reverse(CHANGELIST), {"action": "export_json", "_selected_action": [str(history.pk)]}
    )
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))


def test_it_answers_404_for_a_missing_transcript(superuser: Client, db: Any) -> None:
    missing = reverse(
        "admin:conversations_conversation_transcript",
        args=["00000000-0000-0000-0000-000000000000"],
    )
    assert superuser.get(missing).status_code == 404


def test_a_failure_s_detail_is_for_staff_only(
    admin_client: Client, alice: Any, conversation_with_failure: Conversation
) -> None:
    page = admin_client.get(change_url(conversation_with_failure)).content.decode()
    assert "Failed: The model server could not be reached." in page
    assert "Detail: Could not connect to the model server at http://10.0.0.7:8001/v1/" in page

    owner = Client()
    owner.force_login(alice)
    for url in (
        conversation_with_failure.get_absolute_url(),
        reverse("api-conversation-detail", args=[conversation_with_failure.pk]),
        reverse("api-conversation-export", args=[conversation_with_failure.pk]) + "?format=json",
    ):
        seen = owner.get(url).content.decode()
        assert "could not be reached" in seen and "10.0.0.7" not in seen, url


@pytest.fixture
def conversation_with_failure(alice: Any) -> Conversation:
    conversation = Conversation.objects.create(owner=alice, title="Broken")
    Message.objects.create(conversation=conversation, role="user", content="Hello?")
    Message.objects.create(
        conversation=conversation,
        role="assistant",
        status="error",
        error="The model server could not be reached.",
        error_detail="Could not connect to the model server at http://10.0.0.7:8001/v1/ "
        "(ConnectError).",
    )
    return conversation


def test_it_shows_which_version_of_a_turn_is_shown(admin_client: Client, alice: Any) -> None:
    conversation = Conversation.objects.create(owner=alice, title="Two tries")
    question = Message.objects.create(conversation=conversation, role="user", content="Hi")
    first = Message.objects.create(
        conversation=conversation, parent=question, role="assistant", content="First try"
    )
    second = Message.objects.create(
        conversation=conversation, parent=question, role="assistant", content="Second try"
    )
    Conversation.objects.filter(pk=conversation.pk).update(current_leaf=second)

    page = admin_client.get(change_url(conversation)).content.decode()
    assert f"#{first.pk}: version 1 of 2, not shown; follows #{question.pk}" in page
    assert f"#{second.pk}: version 2 of 2, shown; follows #{question.pk}" in page
    transcript = admin_client.get(transcript_url(conversation)).content.decode()
    assert "version 1 of 2 · not shown (another version)" in transcript
    assert "version 2 of 2 · shown" in transcript

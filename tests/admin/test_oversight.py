"""Staff reading as a policy (issue 26): every staff view of another person's conversation is in
the audit log and its JSONL export, and its owner's page says so; CHAT_STAFF_CAN_READ=0 hides the
text from staff but superusers; "View on site" is its owner's alone; the audit log cannot be
changed or deleted through the admin."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from conversations.models import AuditEvent, Conversation
from tests.admin.conftest import staff

pytestmark = [pytest.mark.django_db]


def change_url(conversation: Conversation) -> str:
    return reverse("admin:conversations_conversation_change", args=[conversation.pk])


def transcript_url(conversation: Conversation) -> str:
    return reverse("admin:conversations_conversation_transcript", args=[conversation.pk])


def failed_login(username: str) -> None:
    response = Client().post(reverse("login"), {"username": username, "password": "wrong"})
    assert response.status_code == 200  # the form again, with its error


def user_named(username: str) -> Any:
    return get_user_model().objects.get(username=username)


def exported_audit(*args: str) -> list[dict[str, Any]]:
    out = io.StringIO()
    call_command("export_audit", *args, stdout=out, stderr=io.StringIO())
    return [json.loads(line) for line in out.getvalue().splitlines()]


def owner_page(owner: Any, conversation: Conversation) -> str:
    client = Client()
    client.force_login(owner)
    response = client.get(conversation.get_absolute_url())
    assert response.status_code == 200
    return response.content.decode()


def test_a_staff_view_of_alices_transcript_is_audited_exported_and_shown_to_her(
    reviewer: Client, history: Conversation, alice: Any
) -> None:
    assert "Opened by staff" not in owner_page(alice, history)
    since = timezone.localdate().isoformat()

    response = reviewer.get(transcript_url(history))

    assert response.status_code == 200 and "A socket is an endpoint." in response.text
    view = AuditEvent.objects.get(event="staff_view")
    assert (view.actor, view.subject, view.conversation_id) == ("reviewer", "alice", history.pk)
    assert view.detail == {"view": "transcript", "text_shown": True}
    exported = [row for row in exported_audit("--since", since) if row["event"] == "staff_view"]
    assert exported == [
        {
            "id": view.pk,
            "at": view.at.isoformat(),
            "event": "staff_view",
            "actor_id": view.actor_id,
            "actor": "reviewer",
            "subject_id": alice.pk,
            "subject": "alice",
            "conversation_id": str(history.pk),
            "ip": "127.0.0.1",
            "detail": {"view": "transcript", "text_shown": True},
        }
    ]
    page = owner_page(alice, history)
    assert "Opened by staff: reviewer" in page
    assert f'datetime="{timezone.localtime(view.at).isoformat()}"' in page


def test_the_admin_page_downloads_and_exports_are_views_too(
    reviewer: Client, history: Conversation
) -> None:
    reviewer.get(change_url(history))
    reviewer.get(transcript_url(history), {"download": "markdown"})
    changelist = reverse("admin:conversations_conversation_changelist")
    reviewer.post(changelist, {"action": "export_json", "_selected_action": [history.pk]})

    views = AuditEvent.objects.filter(event="staff_view", conversation_id=history.pk)
    assert sorted(v.detail["view"] for v in views) == [
        "admin page",
        "download (markdown)",
        "export (json)",
    ]


def test_staff_reading_their_own_conversation_is_not_a_staff_view(db: Any) -> None:
    client = staff("lead", "view_conversation")
    own = Conversation.objects.create(owner=user_named("lead"), title="Mine")

    assert client.get(transcript_url(own)).status_code == 200
    assert not AuditEvent.objects.filter(event="staff_view").exists()


def test_with_staff_reading_off_a_view_only_reviewer_sees_no_text(
    settings: Any, reviewer: Client, superuser: Client, history: Conversation, alice: Any
) -> None:
    settings.CHAT_STAFF_CAN_READ = False
    Conversation.objects.filter(pk=history.pk).update(system_prompt="Keep Q3 quiet")
    history.messages.filter(role="assistant").update(system_prompt="Keep Q3 quiet")

    page = reviewer.get(change_url(history)).text
    transcript = reviewer.get(transcript_url(history)).text

    for shown in (page, transcript):
        assert "Alice&#x27;s chat" in shown  # the title and the metrics stay
        for text in ("Explain sockets", "A socket is an endpoint.", "Long ago", "Keep Q3"):
            assert text not in shown
    assert "scripted-1" in page  # each reply's engine and model, without its system prompt
    assert "CHAT_STAFF_CAN_READ" in transcript
    assert reviewer.get(transcript_url(history), {"download": "json"}).status_code == 403
    changelist = reverse("admin:conversations_conversation_changelist")
    export = reviewer.post(changelist, {"action": "export_json", "_selected_action": [history.pk]})
    assert "application/json" not in export.headers.get("Content-Type", "")
    # Finding it by a word of its messages would read them: the search is of titles only.
    assert "Alice&#x27;s chat" not in reviewer.get(changelist, {"q": "sockets"}).text
    assert "Alice&#x27;s chat" in reviewer.get(changelist, {"q": "Alice"}).text
    assert "Opened by staff" not in owner_page(alice, history)  # what showed no message
    # A superuser still reads it, and its owner sees that.
    assert "A socket is an endpoint." in superuser.get(transcript_url(history)).text
    assert "Keep Q3 quiet" in superuser.get(change_url(history)).text
    shown = owner_page(alice, history)
    assert "Opened by staff: root" in shown and "reviewer" not in shown


def test_view_on_site_is_the_owners_alone(history: Conversation, alice: Any) -> None:
    owner = staff("lead", "view_conversation")
    mine = Conversation.objects.create(owner=user_named("lead"), title="Lead's own")
    other = staff("other", "view_conversation")

    page = owner.get(change_url(mine))
    assert "View on site" in page.text
    assert (
        owner.get(page.context["absolute_url"], follow=True)
        .redirect_chain[-1][0]
        .endswith(mine.get_absolute_url())
    )
    assert owner.get(mine.get_absolute_url()).status_code == 200
    assert "View on site" not in other.get(change_url(mine)).text
    assert "View on site" not in other.get(change_url(history)).text


def test_audit_rows_cannot_be_added_changed_or_deleted_in_the_admin(
    superuser: Client, alice: Any
) -> None:
    failed_login("alice")
    row = AuditEvent.objects.get(event="login_failed")
    change = reverse("admin:conversations_auditevent_change", args=[row.pk])
    changelist = reverse("admin:conversations_auditevent_changelist")

    assert "alice" in superuser.get(changelist).text
    assert superuser.get(change).status_code == 200  # to read
    assert superuser.post(change, {"actor": "nobody"}).status_code == 403
    delete = reverse("admin:conversations_auditevent_delete", args=[row.pk])
    assert superuser.post(delete, {"post": "yes"}).status_code == 403
    assert superuser.get(reverse("admin:conversations_auditevent_add")).status_code == 403
    bulk = {"action": "delete_selected", "_selected_action": [row.pk], "post": "yes"}
    superuser.post(changelist, bulk)
    assert AuditEvent.objects.get(pk=row.pk).actor == ""


def test_the_audit_log_is_for_those_with_its_permission(alice: Any) -> None:
    failed_login("alice")
    changelist = reverse("admin:conversations_auditevent_changelist")

    assert staff("reviewer", "view_conversation").get(changelist).status_code == 403
    assert staff("auditor", "view_auditevent").get(changelist).status_code == 200

"""manage.py prune_conversations on real rows: by age, each option, files and usage."""

from __future__ import annotations

import io
import logging
from datetime import timedelta
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.core.management import CommandError, call_command
from django.utils import timezone

from conversations.models import (
    Attachment,
    AuditEvent,
    Conversation,
    Message,
    Project,
    TokenUsage,
)
from conversations.services import audit

pytestmark = [pytest.mark.django_db(transaction=True)]


def aged(owner: Any, days: float, **fields: Any) -> Conversation:
    """A conversation last active `days` ago, with a message."""
    conversation = Conversation.objects.create(owner=owner, title=f"{days} days", **fields)
    Message.objects.create(conversation=conversation, role=Message.Role.USER, content="hi")
    at = timezone.now() - timedelta(days=days)
    # Written past auto_now, as an import keeps its source's times.
    Conversation.objects.filter(pk=conversation.pk).update(updated_at=at, created_at=at)
    return conversation


def prune(*args: str) -> str:
    out = io.StringIO()
    call_command("prune_conversations", *args, stdout=out)
    return out.getvalue()


def left() -> set[str]:
    return set(Conversation.objects.values_list("title", flat=True))


def test_it_keeps_everything_when_the_retention_is_empty(alice: Any, settings: Any) -> None:
    settings.CHAT_RETENTION_DAYS = None
    aged(alice, 400)
    assert "kept however old" in prune()
    assert left() == {"400 days"}


def test_it_deletes_what_is_older_than_chat_retention_days_only(
    alice: Any, charlie: Any, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    settings.CHAT_RETENTION_DAYS = 30
    aged(alice, 31)
    aged(charlie, 45)
    aged(alice, 29)
    with caplog.at_level(logging.INFO, logger="chatsite.conversations"):
        assert prune() == "Deleted 2 conversations.\n"
    assert left() == {"29 days"}
    assert "pruned 2 conversations (older than 30 days" in caplog.text


def test_days_overrides_the_setting_and_must_be_positive(alice: Any, settings: Any) -> None:
    settings.CHAT_RETENTION_DAYS = None
    aged(alice, 8)
    aged(alice, 6)
    with pytest.raises(CommandError, match="at least 1"):
        prune("--days", "0")
    assert prune("--days", "7") == "Deleted 1 conversation.\n"
    assert left() == {"6 days"}


def test_a_dry_run_lists_and_deletes_nothing(alice: Any, settings: Any) -> None:
    settings.CHAT_RETENTION_DAYS = 30
    old = aged(alice, 90)
    aged(alice, 1)
    output = prune("--dry-run")
    assert str(old.pk) in output and "alice" in output and "90 days" in output
    assert output.endswith("Would delete 1 conversation.\n")
    assert left() == {"90 days", "1 days"}


def test_it_deletes_the_files_keeps_the_usage_and_the_audit_rows(
    alice: Any, settings: Any, tmp_path: Any
) -> None:
    settings.MEDIA_ROOT = str(tmp_path)
    settings.CHAT_RETENTION_DAYS = 30
    old = aged(alice, 60)
    message = old.messages.get()
    name = default_storage.save("attachments/note.txt", ContentFile(b"a note"))
    Attachment.objects.create(
        owner=alice,
        conversation=old,
        message=message,
        name="note.txt",
        kind="text/plain",
        size=6,
        file=name,
        text="a note",
    )
    TokenUsage.objects.create(
        user=alice, day=timezone.localdate(), model_slug="default", replies=1, completion_tokens=9
    )
    audit.record(AuditEvent.Event.EXPORT, conversation=old, actor=alice, format="json")

    assert prune() == "Deleted 1 conversation.\n"
    assert not Conversation.objects.exists()
    assert not default_storage.exists(name)
    assert TokenUsage.objects.get(user=alice).completion_tokens == 9
    assert AuditEvent.objects.filter(conversation_id=old.pk).count() == 1


def test_temporary_chats_left_behind_go_whatever_the_setting(alice: Any, settings: Any) -> None:
    settings.CHAT_RETENTION_DAYS = None
    aged(alice, 2, temporary=True)
    # One a tab may still have open: idle for under a day.
    Conversation.objects.create(owner=alice, title="open now", temporary=True)
    assert prune().endswith("Deleted 1 conversation.\n")
    assert left() == {"open now"}


def test_pinned_conversations_are_kept_unless_included(alice: Any, settings: Any) -> None:
    settings.CHAT_RETENTION_DAYS = 30
    aged(alice, 60, pinned=True)
    aged(alice, 61)
    assert prune() == "Deleted 1 conversation.\n"
    assert left() == {"60 days"}
    assert prune("--include-pinned") == "Deleted 1 conversation.\n"
    assert left() == set()


def test_project_conversations_are_kept_unless_included(alice: Any, settings: Any) -> None:
    project = Project.objects.create(owner=alice, name="Roadmap")
    settings.CHAT_RETENTION_DAYS = 30
    aged(alice, 60, project=project)
    aged(alice, 61)
    assert prune() == "Deleted 1 conversation.\n"
    assert left() == {"60 days"}
    assert prune("--include-projects") == "Deleted 1 conversation.\n"
    assert left() == set()

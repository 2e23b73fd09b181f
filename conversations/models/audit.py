"""AuditEvent: the audit log, a row per thing done that a team's admins must be able to account
for (sign-ins, changes of passwords, tokens, groups, permissions, models and budgets, exports,
imports, share links, and every staff view of another person's conversation).

Append-only. A row is never updated: who acted and whose data it was are copied in (ids and
names, not foreign keys), so deleting an account changes nothing here, and on PostgreSQL a
trigger refuses any UPDATE (migration 0019). Rows leave only by age, through
`AuditEventQuerySet.prune` (`manage.py prune_audit`, CHAT_AUDIT_RETENTION_DAYS).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import models
from django.utils import timezone


class AuditEventQuerySet(models.QuerySet["AuditEvent"]):
    def update(self, **kwargs: Any) -> int:
        raise TypeError("The audit log is append-only: its rows are never changed.")

    def delete(self) -> tuple[int, dict[str, int]]:
        raise TypeError("The audit log is append-only: rows leave only by age (prune).")

    def prune(self, *, before: datetime) -> int:
        """Delete the rows older than `before`; how many went."""
        # A plain QuerySet's delete(), which this one refuses everywhere else.
        older: models.QuerySet[AuditEvent] = models.QuerySet(self.model, using=self.db)
        older = older.filter(at__lt=before)
        deleted, _ = older.delete()
        return deleted

    def staff_views_of(self, conversation_id: Any) -> AuditEventQuerySet:
        return self.filter(event=AuditEvent.Event.STAFF_VIEW, conversation_id=conversation_id)


class AuditEvent(models.Model):
    class Event(models.TextChoices):
        LOGIN = "login", "Signed in"
        LOGIN_FAILED = "login_failed", "Sign-in failed"
        LOGOUT = "logout", "Signed out"
        PASSWORD_CHANGED = "password_changed", "Password changed"
        TOKEN_CREATED = "token_created", "API token created"
        TOKEN_REVOKED = "token_revoked", "API token revoked"
        INVITATION_CREATED = "invitation_created", "Invitation created"
        INVITATION_ACCEPTED = "invitation_accepted", "Invitation accepted"
        GROUPS_CHANGED = "groups_changed", "Groups changed"
        PERMISSIONS_CHANGED = "permissions_changed", "Permissions changed"
        MODEL_CHANGED = "model_changed", "Model changed"
        BUDGET_CHANGED = "budget_changed", "Budget changed"
        EXPORT = "export", "Conversations exported"
        IMPORT = "import", "History imported"
        SHARE_CREATED = "share_created", "Share link created"
        SHARE_REVOKED = "share_revoked", "Share link revoked"
        STAFF_VIEW = "staff_view", "Staff viewed a conversation"

    at = models.DateTimeField(default=timezone.now, db_index=True)
    event = models.CharField(max_length=32, choices=Event.choices)
    # Who acted: a user's id and username when signed in; empty for an anonymous request, or
    # a source's name (an identity provider, a command) in `actor`.
    actor_id = models.BigIntegerField(null=True, blank=True)
    actor = models.CharField(max_length=200, blank=True)
    # Whose account or data it concerns, when it is a person's.
    subject_id = models.BigIntegerField(null=True, blank=True)
    subject = models.CharField(max_length=200, blank=True)
    # The conversation it concerns, when one: a staff view, an export of one.
    conversation_id = models.UUIDField(null=True, blank=True)
    ip = models.GenericIPAddressField(null=True, blank=True)
    # What was done, in a few fields (the format exported, the groups added, the fields changed).
    detail = models.JSONField(default=dict, blank=True)

    objects = AuditEventQuerySet.as_manager()

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [
            models.Index(fields=["conversation_id", "event", "-at"], name="audit_by_conversation"),
            models.Index(fields=["subject_id", "-at"], name="audit_by_subject"),
        ]

    def __str__(self) -> str:
        who = self.actor or "someone"
        whom = f" ({self.subject})" if self.subject and self.subject != self.actor else ""
        return f"{self.at:%Y-%m-%d %H:%M} {who}: {self.get_event_display()}{whom}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise TypeError("The audit log is append-only: its rows are never changed.")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        raise TypeError("The audit log is append-only: rows leave only by age (prune).")

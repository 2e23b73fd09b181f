"""The audit log in the admin: read and filtered by those with its view permission, never added
to, changed or deleted (rows leave only by age, `manage.py prune_audit`)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from conversations.admin.review import ReadOnlyMixin
from conversations.models import AuditEvent


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyMixin, admin.ModelAdmin[AuditEvent]):
    list_display = ("at", "event", "actor", "subject", "conversation_id", "ip")
    list_filter = ("event", ("at", admin.DateFieldListFilter))
    search_fields = ("actor", "subject", "=conversation_id")
    search_help_text = "Who acted, whose account it was (usernames), or a conversation's id."
    date_hierarchy = "at"
    fields = (
        "at",
        "event",
        "actor",
        "actor_id",
        "subject",
        "subject_id",
        "conversation_id",
        "ip",
        "detail",
    )
    readonly_fields = fields
    # The count of a large log on every page costs more than it tells.
    show_full_result_count = False

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        return {}  # not even "delete selected": nobody deletes here

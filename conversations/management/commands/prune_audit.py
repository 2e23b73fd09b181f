"""manage.py prune_audit: delete the audit log's rows older than CHAT_AUDIT_RETENTION_DAYS."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from conversations.services import audit


class Command(BaseCommand):
    help = "Delete the audit log's rows older than CHAT_AUDIT_RETENTION_DAYS (0 keeps them all)."

    def handle(self, *args: Any, **options: Any) -> None:
        days = settings.CHAT_AUDIT_RETENTION_DAYS
        if not days:
            self.stdout.write("CHAT_AUDIT_RETENTION_DAYS is 0: the audit log keeps every row.")
            return
        deleted = audit.prune()
        self.stdout.write(
            f"{deleted} audit row{'s' if deleted != 1 else ''} older than {days} days deleted."
        )

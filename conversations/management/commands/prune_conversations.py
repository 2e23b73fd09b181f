"""manage.py prune_conversations: delete the conversations idle for over CHAT_RETENTION_DAYS."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from conversations.services.retention import Pruning, conversations_prunable, conversations_prune


class Command(BaseCommand):
    help = (
        "Delete the conversations whose last activity is older than CHAT_RETENTION_DAYS (empty: "
        "none), except pinned ones and those in a project, and temporary chats left behind."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--days", type=int, help="days to keep, in place of CHAT_RETENTION_DAYS (at least 1)"
        )
        parser.add_argument(
            "--include-pinned", action="store_true", help="delete pinned conversations too"
        )
        parser.add_argument(
            "--include-projects",
            action="store_true",
            help="delete conversations in a project too",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="list what would be deleted; delete nothing"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        days: int | None = options["days"]
        if days is not None and days < 1:
            raise CommandError(f"--days must be at least 1; got {days}.")
        if days is None:
            days = settings.CHAT_RETENTION_DAYS
        if days is None:
            self.stdout.write(
                "CHAT_RETENTION_DAYS is empty: conversations are kept however old (only "
                "temporary chats left behind are deleted)."
            )
        pruning = Pruning(
            days=days,
            include_pinned=options["include_pinned"],
            include_projects=options["include_projects"],
        )
        if options["dry_run"]:
            would = conversations_prunable(pruning=pruning).select_related("owner")
            for conversation in would:
                self.stdout.write(
                    f"{conversation.pk}  {conversation.owner}  "
                    f"{conversation.updated_at:%Y-%m-%d %H:%M}  {conversation}"
                )
            count = len(would)
            self.stdout.write(f"Would delete {count} conversation{'s' if count != 1 else ''}.")
            return
        deleted = conversations_prune(pruning=pruning)
        self.stdout.write(f"Deleted {deleted} conversation{'s' if deleted != 1 else ''}.")

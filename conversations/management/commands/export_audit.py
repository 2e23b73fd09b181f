"""manage.py export_audit --since 2026-11-01: the audit log as JSON Lines, oldest first."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import datetime, time
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from conversations.services import audit


def moment(value: str) -> datetime:
    """A date (its midnight) or a date and time, in TIME_ZONE unless it names its offset."""
    parsed = parse_datetime(value)
    if parsed is None:
        day = parse_date(value)
        if day is None:
            raise argparse.ArgumentTypeError(
                f"{value!r} is not a date (2026-11-01) or a date and time (2026-11-01T09:00)."
            )
        parsed = datetime.combine(day, time.min)
    return timezone.make_aware(parsed) if timezone.is_naive(parsed) else parsed


class Command(BaseCommand):
    help = "Write the audit log's rows since a date as JSON Lines (to stdout, or --output)."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--since",
            type=moment,
            required=True,
            help="The first moment wanted: 2026-11-01, or 2026-11-01T09:00 (TIME_ZONE unless "
            "an offset is given).",
        )
        parser.add_argument("--output", help="A file to write instead of stdout.")

    def handle(self, *args: Any, **options: Any) -> None:
        since, path = options["since"], options["output"]
        if path:
            try:
                with open(path, "w", encoding="utf-8") as out:
                    written = self.write_rows(since, lambda line: out.write(line + "\n"))
            except OSError as exc:
                raise CommandError(f"Cannot write {path}: {exc.strerror}.") from None
        else:
            written = self.write_rows(since, self.stdout.write)  # which ends each line
        self.stderr.write(f"{written} audit row{'s' if written != 1 else ''} written.")

    def write_rows(self, since: datetime, write: Callable[[str], object]) -> int:
        written = 0
        for event in audit.events_since(since):
            write(audit.as_json_line(event))
            written += 1
        return written

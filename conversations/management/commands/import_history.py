"""python manage.py import_history <username> <file>: the import of the settings page and the
API, for files too large to upload or for scripts. Prints what was imported and skipped."""

from __future__ import annotations

from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError

from conversations.imports import FORMATS
from conversations.imports.importer import ImportReport, import_history
from conversations.imports.source import ImportRefused
from conversations.services import audit


class Command(BaseCommand):
    help = (
        "Import a ChatGPT, Claude, Open WebUI or chatsite export into a user's history "
        "(all or nothing unless --keep-partial)."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("username", help="Whose history the conversations join.")
        parser.add_argument("file", type=Path, help="The export: a zip, JSON or JSONL file.")
        parser.add_argument(
            "--format", choices=list(FORMATS), help="The file's format (default: detected)."
        )
        parser.add_argument(
            "--keep-partial",
            action="store_true",
            help="Import what can be, skipping conversations that cannot be imported.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            owner = User.objects.get(username=options["username"])
        except User.DoesNotExist:
            raise CommandError(f"No user is named {options['username']!r}.") from None
        path: Path = options["file"]
        try:
            with path.open("rb") as file, audit.acting_as("manage.py import_history"):
                report = import_history(
                    owner=owner,
                    file=file,
                    fmt=options["format"],
                    keep_partial=options["keep_partial"],
                )
        except OSError as exc:
            raise CommandError(f"Cannot read {path}: {exc.strerror or exc}.") from None
        except ImportRefused as exc:
            raise CommandError(f"{exc.message} ({exc.code})") from None
        self.print_report(report)

    def print_report(self, report: ImportReport) -> None:
        label = FORMATS[report.format].LABEL if report.format else "?"
        self.stdout.write(
            self.style.SUCCESS(f"Imported {len(report.imported)} conversations from {label}.")
        )
        for item in report.imported:
            self.stdout.write(f"  imported {item.id}  {item.title!r}  {item.messages} messages")
        for skip in report.skipped:
            what = "skipped" if skip.messages is None else f"left out {skip.messages} messages of"
            name = skip.title or skip.external_id or "untitled"
            self.stdout.write(f"  {what} {name!r}: {skip.reason}")
        if report.stopped:
            self.stdout.write(self.style.WARNING(f"Stopped early: {report.stopped}"))

"""Importing in tests: the service on bytes, API clients, and reading back what was written."""

from __future__ import annotations

import io
from typing import Any

from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from conversations.imports.importer import ImportReport, import_history
from conversations.models import Conversation, Message
from conversations.services import branches
from conversations.services.tokens import api_token_create


def imported(owner: Any, data: bytes, **options: Any) -> ImportReport:
    """import_history on a file holding `data`."""
    return import_history(owner=owner, file=io.BytesIO(data), **options)


def upload(data: bytes, name: str = "export.zip") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data)


def api_client(user: Any) -> Client:
    return Client(headers={"Authorization": f"Bearer {api_token_create(user=user, name='t')[1]}"})


def shown(conversation: Conversation) -> list[tuple[str, str]]:
    """The branch shown, as (role, content)."""
    conversation.refresh_from_db()
    return [(m.role, m.content) for m in branches.visible_branch(conversation)]


def by_content(conversation: Conversation) -> dict[str, Message]:
    return {m.content: m for m in conversation.messages.all()}


def left_out(report: ImportReport, title: str) -> dict[str, int]:
    """Of an imported conversation, how many messages were left out for each reason."""
    return {
        s.reason: s.messages for s in report.skipped if s.title == title and s.messages is not None
    }

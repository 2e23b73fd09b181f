"""python manage.py import_history <username> <file>."""

from __future__ import annotations

from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from conversations.models import Conversation
from tests.imports.sources import as_json, chatgpt_branched, chatgpt_zip, claude_conversation

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command("import_history", *args, stdout=out)
    return out.getvalue()


def test_it_imports_a_file_and_prints_the_report(alice: Any, tmp_path: Path) -> None:
    path = tmp_path / "chatgpt-export.zip"
    path.write_bytes(chatgpt_zip(chatgpt_branched()))

    printed = run("alice", str(path))

    chat = Conversation.objects.get(owner=alice)
    assert printed.splitlines() == [
        "Imported 1 conversations from ChatGPT.",
        f"  imported {chat.pk}  'Arithmetic'  6 messages",
        "  left out 2 messages of 'Arithmetic': tool calls and tool results are not imported",
    ]
    assert "skipped 'Arithmetic': already imported" in run("alice", str(path))


def test_format_and_keep_partial(alice: Any, tmp_path: Path) -> None:
    path = tmp_path / "conversations.json"
    bad = claude_conversation("bad") | {"chat_messages": None, "name": "Bad"}
    path.write_bytes(as_json([claude_conversation(), bad]))

    with pytest.raises(CommandError, match=r"\(bad_conversation\)"):
        run("alice", str(path), "--format", "claude")
    assert not Conversation.objects.exists()

    printed = run("alice", str(path), "--format", "claude", "--keep-partial")
    assert "skipped 'Bad': Its `chat_messages` is not a list." in printed
    assert Conversation.objects.filter(owner=alice).count() == 1


def test_what_cannot_be_imported_is_a_clear_error(alice: Any, tmp_path: Path) -> None:
    huge = tmp_path / "huge.zip"
    with huge.open("wb") as file:
        file.truncate(1024**3)  # sparse: a real gigabyte file that takes no disk
    with pytest.raises(CommandError) as refused:
        run("alice", str(huge))
    assert str(refused.value) == (
        "The file is 1.0 GB; imports are limited to 512.0 MB. (too_large)"
    )

    with pytest.raises(CommandError, match="No user is named 'nobody'"):
        run("nobody", str(huge))
    with pytest.raises(CommandError, match=r"Cannot read .*missing\.json: No such file"):
        run("alice", str(tmp_path / "missing.json"))
    assert not Conversation.objects.exists()

"""What one import may hold (the CHAT_IMPORT_* settings), and the words its refusals use."""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import IO

from django.conf import settings

from conversations.imports.source import ImportRefused
from conversations.services.text import size_in_words


@dataclass(frozen=True)
class Limits:
    """What one import may hold (the CHAT_IMPORT_* settings)."""

    max_bytes: int
    max_conversation_bytes: int
    max_conversations: int
    max_messages: int
    max_message_chars: int

    @classmethod
    def from_settings(cls) -> Limits:
        return cls(
            max_bytes=settings.CHAT_IMPORT_MAX_BYTES,
            max_conversation_bytes=settings.CHAT_IMPORT_MAX_CONVERSATION_BYTES,
            max_conversations=settings.CHAT_IMPORT_MAX_CONVERSATIONS,
            max_messages=settings.CHAT_IMPORT_MAX_MESSAGES,
            max_message_chars=settings.CHAT_IMPORT_MAX_MESSAGE_CHARS,
        )


def size_of(file: IO[bytes]) -> int:
    """The file's size from its end, without reading it."""
    file.seek(0, io.SEEK_END)
    size = file.tell()
    file.seek(0)
    return size


def too_large(size: int, limit: int, what: str = "The file") -> ImportRefused:
    return ImportRefused(
        "too_large",
        f"{what} is {size_in_words(size)}; imports are limited to {size_in_words(limit)}.",
    )


def described(exc: Exception) -> str:
    """The first line of what `exc` says (its type when it says nothing), for a refusal."""
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__

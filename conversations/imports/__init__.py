"""Importing history from other chat apps' exports and from chatsite's own.

One module per format, each with the same small shape: NAME (stored as the conversation's
origin_detail), LABEL (what people read), looks_like(value) (is this JSON value one of its
conversations?) and parse(value) -> SourceConversation. A new format is one module and one line
in FORMATS. Reading the file (JSON, JSON lines) is reading.py, with its limits in limits.py and
a zip's checks in zips.py; the import itself is importer.py, and writing what was read, writing.py.
"""

from __future__ import annotations

from typing import Any, Protocol

from conversations.imports import chatgpt, chatsite, claude, openwebui
from conversations.imports.source import SourceConversation


class Format(Protocol):
    """A format's module (mypy checks each module against this)."""

    @property
    def NAME(self) -> str: ...  # a module constant

    @property
    def LABEL(self) -> str: ...

    def looks_like(self, value: Any) -> bool: ...

    def parse(self, value: Any) -> SourceConversation: ...


# In the order detection tries them.
FORMATS: dict[str, Format] = {
    chatgpt.NAME: chatgpt,
    claude.NAME: claude,
    openwebui.NAME: openwebui,
    chatsite.NAME: chatsite,
}


def detect(value: Any) -> Format | None:
    """The format one of whose conversations `value` is (the file's first), if any."""
    return next((fmt for fmt in FORMATS.values() if fmt.looks_like(value)), None)

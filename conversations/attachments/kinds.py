"""The kind of an attached file, from its bytes: a name says what its sender calls it, not what it
is. filetype knows the signatures of PDFs and images; a zip is a DOCX only if it holds a Word
document's parts (filetype calls any zip of them DOCX); text is strict UTF-8 without NUL and with
hardly any control characters (CSV, JSON, Markdown and code are text too: the prompt wants their
text, and the name only says how to show it)."""

from __future__ import annotations

import io
import unicodedata
import zipfile

import filetype

from conversations.models.attachments import Kind

__all__ = ["Kind", "kind_of"]

SNIFFED_BYTES = 8192  # filetype reads no further than the signatures at the start
DOCX_PARTS = {"[Content_Types].xml", "word/document.xml"}
# Text may hold a few control characters (a form feed, an escape in a log), not many.
CONTROL_CHARS_PER_THOUSAND = 1
TEXT_CHECKED_CHARS = 65_536


def kind_of(data: bytes) -> Kind | None:
    """What the file is, or None for a kind chatsite does not read."""
    guessed = filetype.guess_mime(data[:SNIFFED_BYTES])
    if guessed in {Kind.PDF, Kind.PNG, Kind.JPEG, Kind.GIF, Kind.WEBP}:
        return Kind(guessed)
    if data[:4] == b"PK\x03\x04":
        return Kind.DOCX if _holds_a_word_document(data) else None
    if guessed is None and _is_text(data):
        return Kind.TEXT
    return None


def _holds_a_word_document(data: bytes) -> bool:
    try:  # reads the zip's directory only, not its members
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            return set(archive.namelist()) >= DOCX_PARTS
    except (zipfile.BadZipFile, ValueError, OSError):
        return False


def _is_text(data: bytes) -> bool:
    if b"\0" in data:
        return False
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return False
    checked = text[:TEXT_CHECKED_CHARS]
    controls = sum(
        1 for char in checked if unicodedata.category(char) == "Cc" and char not in "\t\n\r\f"
    )
    return controls * 1000 <= len(checked) * CONTROL_CHARS_PER_THOUSAND

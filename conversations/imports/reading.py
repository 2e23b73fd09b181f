"""Reading an uploaded export as a stream of JSON values, one conversation at a time, bounded.

A file is a JSON array (ChatGPT's, Claude's and Open WebUI's conversations.json), one JSON
object (a chatsite conversation), JSON lines (chatsite's export of everything), or a zip holding
one of them. Nothing reads a whole file: ijson parses the array or the lines incrementally, so
memory holds one conversation at a time, and every byte read is counted against limits:

- the file's size, checked before anything of it is read;
- a zip's member count, the size its conversations file says it inflates to and its compression
  ratio (a zip bomb is refused before it is inflated), and the bytes it really inflates to
  (a member that lies about its size is refused while it is read);
- the bytes of one conversation, so a single huge object cannot fill the memory.
"""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import IO, Any

import ijson
from django.conf import settings
from django.template.defaultfilters import filesizeformat
from ijson.common import ObjectBuilder

from conversations.imports.source import ImportRefused

ZIP_MAGIC = b"PK\x03\x04"
BOM = b"\xef\xbb\xbf"
# JSON nests about ten deep in exports; far deeper is a file made to exhaust the parser.
MAX_DEPTH = 64
BUFFER_BYTES = 64 * 1024
# A real export zip holds its conversations file and attachments (ChatGPT: images, audio):
# thousands of members at most. Listing more is work a zip can make up for nothing.
MAX_ZIP_MEMBERS = 100_000
# JSON compresses about 5 to 20 times; a run of zeros, 1,000 times and more. Past this ratio a
# member is a zip bomb, not an export (checked from the sizes the zip declares, before inflating).
MAX_COMPRESSION_RATIO = 100
# Small members may compress further without being a threat to anyone.
RATIO_CHECKED_FROM = 1024 * 1024
CONVERSATION_FILES = ("conversations.json", "conversations.jsonl")
JSON_SUFFIXES = (".json", ".jsonl")


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


def size_in_words(size: int) -> str:
    """1.0 GB, 512.0 MB: Django's words, with a plain space (its own is non-breaking, for pages)."""
    return str(filesizeformat(size)).replace("\xa0", " ")


def too_large(size: int, limit: int, what: str = "The file") -> ImportRefused:
    return ImportRefused(
        "too_large",
        f"{what} is {size_in_words(size)}; imports are limited to {size_in_words(limit)}.",
    )


class BoundedReader(io.RawIOBase):
    """A binary stream that counts what it reads: over `limit` bytes in all, or over
    `window_limit` since the last mark() (the start of a conversation), it refuses to go on."""

    def __init__(self, raw: IO[bytes], *, limit: int, window_limit: int, over_limit: str):
        self.raw = raw
        self.limit = limit
        self.window_limit = window_limit
        self.over_limit = over_limit  # what to say when the whole stream is over its limit
        self.consumed = 0
        self.window_start = 0
        self.conversation_number = 1

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        try:
            data = self.raw.read(len(buffer))
        except (zipfile.BadZipFile, zlib.error, EOFError) as exc:  # a damaged zip member
            raise ImportRefused("bad_zip", f"The zip is damaged: {_short(exc)}.") from None
        self.consumed += len(data)
        if self.consumed > self.limit:
            raise ImportRefused("too_large", self.over_limit)
        if self.consumed - self.window_start > self.window_limit:
            raise ImportRefused(
                "conversation_too_large",
                f"Conversation {self.conversation_number} of the file is over "
                f"{size_in_words(self.window_limit)} of JSON, the most an import reads for "
                "one conversation.",
            )
        buffer[: len(data)] = data
        return len(data)

    def mark(self, conversation_number: int) -> None:
        """A new conversation starts: its bytes count from here (give or take ijson's buffer)."""
        self.window_start = self.consumed
        self.conversation_number = conversation_number


@contextmanager
def json_values(file: IO[bytes], limits: Limits) -> Iterator[tuple[Iterator[Any], BoundedReader]]:
    """The file's top-level JSON values: each item of an array, or each object of a file of
    one object or of JSON lines. The reader is there to mark where each conversation starts."""
    size = size_of(file)
    if size > limits.max_bytes:
        raise too_large(size, limits.max_bytes)
    with ExitStack() as stack:
        raw: IO[bytes] = file
        budget = limits.max_bytes
        over = f"The file is over {size_in_words(limits.max_bytes)}."
        if file.read(len(ZIP_MAGIC)) == ZIP_MAGIC:
            file.seek(0)
            raw, budget = stack.enter_context(_zip_member(file, limits))
            over = (
                "The zip's conversations file inflates to more than it says (or more than "
                f"{size_in_words(limits.max_bytes)}): it is not an export."
            )
        else:
            file.seek(0)
        reader = BoundedReader(
            raw, limit=budget, window_limit=limits.max_conversation_bytes, over_limit=over
        )
        stream = io.BufferedReader(reader, buffer_size=BUFFER_BYTES)
        first = _first_character(stream)
        if first == b"[":  # a list of conversations
            values = _items(ijson.basic_parse(stream, use_float=True), base=1)
        elif first == b"{":  # one conversation, or one a line
            events = ijson.basic_parse(stream, use_float=True, multiple_values=True)
            values = _items(events, base=0)
        else:
            raise ImportRefused(
                "not_json",
                "The file is not an export chatsite reads: a JSON list or object, JSON lines, "
                "or a zip holding one.",
            )
        yield _guarded(values), reader


def _first_character(stream: io.BufferedReader[BoundedReader]) -> bytes:
    """The first byte that is not white space or a UTF-8 byte order mark, left unread (white
    space is skipped a buffer at a time: a file of spaces is no loop over each)."""
    while True:
        chunk = stream.peek(BUFFER_BYTES)
        if not chunk:
            return b""
        rest = chunk.lstrip(b" \t\r\n")
        stream.read(len(chunk) - len(rest))
        if rest.startswith(BOM):  # as some editors save
            stream.read(len(BOM))
        elif rest:
            return rest[:1]


def _items(events: Iterator[tuple[str, Any]], *, base: int) -> Iterator[Any]:
    """The values at nesting depth `base` (1: the items of the top-level list; 0: each top-level
    value), built from ijson's events, refusing JSON nested deeper than MAX_DEPTH.

    ijson.items() would build them in C, about three times as fast, but with no bound on
    nesting: a 5 MB file of "[[[[..." took it two minutes and 23 GB. Exports nest about ten deep.
    """
    depth = 0
    builder: ObjectBuilder | None = None
    for event, value in events:
        if event in ("start_map", "start_array"):
            depth += 1
            if depth > MAX_DEPTH:
                raise ImportRefused(
                    "too_deep",
                    f"The file nests JSON over {MAX_DEPTH} levels deep: it is no export.",
                )
            if depth == base:  # the top-level list itself
                continue
        elif event in ("end_map", "end_array"):
            depth -= 1
            if depth < base:
                continue
        if builder is None:
            builder = ObjectBuilder()
        builder.event(event, value)
        if depth == base:  # a value at `base` is complete
            yield builder.value
            builder = None


def _guarded(values: Iterator[Any]) -> Iterator[Any]:
    """ijson's errors in the words the import reports (it stops at the first one)."""
    number = 0
    while True:
        number += 1
        try:
            value = next(values)
        except StopIteration:
            return
        except (ijson.JSONError, UnicodeDecodeError) as exc:
            raise ImportRefused(
                "not_json",
                f"The file is not valid JSON at conversation {number} ({_short(exc)}).",
            ) from None
        yield value


def _short(exc: Exception) -> str:
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__


@contextmanager
def _zip_member(file: IO[bytes], limits: Limits) -> Iterator[tuple[IO[bytes], int]]:
    """The zip's conversations file, open, and the most bytes it may inflate to."""
    entries = _declared_entries(file)
    if entries > MAX_ZIP_MEMBERS:
        raise ImportRefused(
            "zip_bomb", f"The zip holds over {MAX_ZIP_MEMBERS:,} files: it is not an export."
        )
    try:
        archive = zipfile.ZipFile(file)
    except (zipfile.BadZipFile, zlib.error, EOFError, ValueError) as exc:
        raise ImportRefused("bad_zip", f"The zip cannot be read: {_short(exc)}.") from None
    with archive:
        member = _conversations_member(archive.infolist())
        if member.flag_bits & 0x1:
            raise ImportRefused("bad_zip", "The zip is encrypted.")
        if member.file_size > limits.max_bytes:
            raise too_large(member.file_size, limits.max_bytes, f"{member.filename} in the zip")
        if member.file_size > RATIO_CHECKED_FROM and member.file_size > MAX_COMPRESSION_RATIO * max(
            member.compress_size, 1
        ):
            raise ImportRefused(
                "zip_bomb",
                f"{member.filename} in the zip inflates {member.file_size // max(member.compress_size, 1):,} "
                f"times: it is not an export.",
            )
        try:
            opened = archive.open(member)
        except (zipfile.BadZipFile, zlib.error, NotImplementedError, EOFError) as exc:
            raise ImportRefused("bad_zip", f"The zip cannot be read: {_short(exc)}.") from None
        with opened:
            # zipfile itself stops at the declared size; the reader's limit says so clearly.
            yield opened, member.file_size


def _declared_entries(file: IO[bytes]) -> int:
    """How many files the zip's end record says it holds, read before zipfile lists them all
    (a listing of millions of empty files would fill the memory). 0 when there is no end record:
    zipfile then refuses the file itself."""
    # The end record (22 bytes and a comment of up to 64 KiB) closes the file.
    size = size_of(file)
    file.seek(max(0, size - 22 - 65535))
    tail = file.read()
    file.seek(0)
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) < at + 22:
        return 0
    (entries,) = struct.unpack_from("<H", tail, at + 10)
    zip64_locator = at - 20
    if (
        entries == 0xFFFF
        and zip64_locator >= 0
        and tail[zip64_locator:at].startswith(b"PK\x06\x07")
    ):
        # Zip64: the count is in a record the locator points to.
        (record_offset,) = struct.unpack_from("<Q", tail, zip64_locator + 8)
        file.seek(record_offset)
        record = file.read(56)
        file.seek(0)
        if len(record) == 56 and record.startswith(b"PK\x06\x06"):
            (entries,) = struct.unpack_from("<Q", record, 32)
    return int(entries)


def _conversations_member(members: list[zipfile.ZipInfo]) -> zipfile.ZipInfo:
    """conversations.json (at the top, or in the one folder of the zip), or its only JSON file."""
    files = [m for m in members if not m.is_dir()]
    for name in CONVERSATION_FILES:
        named = [m for m in files if m.filename.rsplit("/", 1)[-1] == name]
        if named:
            return min(named, key=lambda m: m.filename.count("/"))
    json_files = [m for m in files if m.filename.lower().endswith(JSON_SUFFIXES)]
    if len(json_files) == 1:
        return json_files[0]
    raise ImportRefused(
        "wrong_shape", "The zip holds no conversations.json: it is not a chat export."
    )

"""Reading an uploaded export as a stream of JSON values, one conversation at a time, bounded.

A file is a JSON array (ChatGPT's, Claude's and Open WebUI's conversations.json), one JSON
object (a chatsite conversation), JSON lines (chatsite's export of everything), or a zip holding
one of them (or ChatGPT's shards of one, read in turn). Nothing reads a whole file: ijson parses
the array or the lines incrementally, so memory holds one conversation at a time, and every byte
read is counted against limits:

- the file's size, checked before anything of it is read;
- a zip's member count, the size its conversations file says it inflates to and its compression
  ratio (a zip bomb is refused before it is inflated), and the bytes it really inflates to
  (a member that lies about its size is refused while it is read);
- the bytes of one conversation, so a single huge object cannot fill the memory.

The limits themselves are in limits.py, a zip's checks in zips.py.
"""

from __future__ import annotations

import io
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import IO, Any

import ijson
from ijson.common import ObjectBuilder

from conversations.imports.limits import Limits, described, size_of, too_large
from conversations.imports.source import ImportRefused
from conversations.imports.zips import ZIP_MAGIC, open_conversations_files
from conversations.services.text import size_in_words

BOM = b"\xef\xbb\xbf"
# JSON nests about ten deep in exports; far deeper is a file made to exhaust the parser.
MAX_DEPTH = 64
BUFFER_BYTES = 64 * 1024


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
            raise ImportRefused("bad_zip", f"The zip is damaged: {described(exc)}.") from None
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
    one object or of JSON lines (in a zip of shards, each shard's in turn). The reader is there
    to mark where each conversation starts."""
    size = size_of(file)
    if size > limits.max_bytes:
        raise too_large(size, limits.max_bytes)
    with ExitStack() as stack:
        files: Iterator[IO[bytes]] = iter([file])
        budget = limits.max_bytes
        over = f"The file is over {size_in_words(limits.max_bytes)}."
        if file.read(len(ZIP_MAGIC)) == ZIP_MAGIC:
            file.seek(0)
            files, budget = stack.enter_context(open_conversations_files(file, limits))
            over = (
                "The zip's conversations file inflates to more than it says (or more than "
                f"{size_in_words(limits.max_bytes)}): it is not an export."
            )
        else:
            file.seek(0)
        reader = BoundedReader(
            file, limit=budget, window_limit=limits.max_conversation_bytes, over_limit=over
        )
        yield _guarded(_each_file(reader, files)), reader


def _each_file(reader: BoundedReader, files: Iterator[IO[bytes]]) -> Iterator[Any]:
    """The values of each file in turn, all read through `reader` (its limits count them all)."""
    for raw in files:
        reader.raw = raw
        stream = io.BufferedReader(reader, buffer_size=BUFFER_BYTES)
        yield from _values(stream)
        stream.detach()  # the reader goes on to the next file: closing this buffer would close it


def _values(stream: io.BufferedReader[BoundedReader]) -> Iterator[Any]:
    first = _first_character(stream)
    if first == b"[":  # a list of conversations
        yield from _items(ijson.basic_parse(stream, use_float=True), base=1)
    elif first == b"{":  # one conversation, or one a line
        events = ijson.basic_parse(stream, use_float=True, multiple_values=True)
        yield from _items(events, base=0)
    else:
        raise ImportRefused(
            "not_json",
            "The file is not an export chatsite reads: a JSON list or object, JSON lines, "
            "or a zip holding one.",
        )


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
                f"The file is not valid JSON at conversation {number} ({described(exc)}).",
            ) from None
        yield value

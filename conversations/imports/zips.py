"""A zip export's conversations file, opened only once what the zip declares looks like an export:
its member count, the size its conversations file inflates to and its compression ratio (a zip
bomb is refused before it is inflated)."""

from __future__ import annotations

import struct
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO

from conversations.imports.limits import Limits, described, size_of, too_large
from conversations.imports.source import ImportRefused

ZIP_MAGIC = b"PK\x03\x04"
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


@contextmanager
def open_conversations_file(file: IO[bytes], limits: Limits) -> Iterator[tuple[IO[bytes], int]]:
    """The zip's conversations file, open, and the most bytes it may inflate to."""
    entries = _declared_entries(file)
    if entries > MAX_ZIP_MEMBERS:
        raise ImportRefused(
            "zip_bomb", f"The zip holds over {MAX_ZIP_MEMBERS:,} files: it is not an export."
        )
    try:
        archive = zipfile.ZipFile(file)
    except (zipfile.BadZipFile, zlib.error, EOFError, ValueError) as exc:
        raise ImportRefused("bad_zip", f"The zip cannot be read: {described(exc)}.") from None
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
            raise ImportRefused("bad_zip", f"The zip cannot be read: {described(exc)}.") from None
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

"""A zip export's conversations file, opened only once what the zip declares looks like an export:
its member count (from the entries of its central directory, before zipfile lists them), the size
its conversations file inflates to and its compression ratio (a zip bomb is refused before it is
inflated). ChatGPT's larger exports split that file into shards (conversations-000.json,
conversations-001.json, ...), each a JSON list: they are read one after another, as one file."""

from __future__ import annotations

import re
import struct
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO

from django.utils.translation import gettext as _

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
# A shard of a split conversations file, numbered from 000.
SHARD = re.compile(r"conversations-(\d{1,6})\.json", re.IGNORECASE)
JSON_SUFFIXES = (".json", ".jsonl")
# The records that end a zip and the central directory's entries: signatures and fixed sizes.
END_RECORD = b"PK\x05\x06"
END_RECORD_SIZE = 22
MAX_COMMENT = 65535  # after the end record
ZIP64_END_RECORD = b"PK\x06\x06"
ZIP64_END_RECORD_SIZE = 56
ZIP64_LOCATOR = b"PK\x06\x07"
ZIP64_LOCATOR_SIZE = 20
DIRECTORY_ENTRY = b"PK\x01\x02"
DIRECTORY_ENTRY_SIZE = 46
# The central directory is walked this much at a time.
CHUNK_BYTES = 64 * 1024


@contextmanager
def open_conversations_files(
    file: IO[bytes], limits: Limits
) -> Iterator[tuple[Iterator[IO[bytes]], int]]:
    """The zip's conversations file (or its shards, in order), each opened in turn as the one
    before is read, and the most bytes they may inflate to in all."""
    if _listed_entries(file, stop_after=MAX_ZIP_MEMBERS) > MAX_ZIP_MEMBERS:
        raise _crowded()
    try:
        archive = zipfile.ZipFile(file)
    except (zipfile.BadZipFile, zlib.error, EOFError, ValueError) as exc:
        raise ImportRefused("bad_zip", f"The zip cannot be read: {described(exc)}.") from None
    with archive:
        members = archive.infolist()
        if len(members) > MAX_ZIP_MEMBERS:  # zipfile found more than the walk: refused all the same
            raise _crowded()
        chosen = _conversations_members(members)
        for member in chosen:
            _check(member, limits)
        total = sum(member.file_size for member in chosen)
        if total > limits.max_bytes:
            what = (
                f"{chosen[0].filename} in the zip"
                if len(chosen) == 1
                else _("Its conversations file, in %(count)d shards in the zip,")
                % {"count": len(chosen)}
            )
            raise too_large(total, limits.max_bytes, what)
        # zipfile itself stops at each declared size; the reader's limit says so clearly.
        yield _opened(archive, chosen), total


def _check(member: zipfile.ZipInfo, limits: Limits) -> None:
    """Refuse a member that is encrypted, or larger than an import, or a zip bomb (from the
    sizes the zip declares, before it is inflated)."""
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


def _opened(archive: zipfile.ZipFile, members: list[zipfile.ZipInfo]) -> Iterator[IO[bytes]]:
    for member in members:
        try:
            opened = archive.open(member)
        except (zipfile.BadZipFile, zlib.error, NotImplementedError, EOFError) as exc:
            raise ImportRefused("bad_zip", f"The zip cannot be read: {described(exc)}.") from None
        with opened:
            yield opened


def _listed_entries(file: IO[bytes], *, stop_after: int) -> int:
    """How many files the zip's central directory lists, counted from its entries themselves
    (the end record's count is only the zip's word: one said 1 and listed 600,000), and no
    more than `stop_after` + 1, so a crowded zip is refused before zipfile lists it whole.
    0 when there is no directory to walk: zipfile then refuses the file itself."""
    directory = _central_directory(file)
    count = 0
    if directory is not None:
        at, end = directory
        chunk, chunk_at = b"", at
        while at < end and count <= stop_after:
            offset = at - chunk_at
            if offset + DIRECTORY_ENTRY_SIZE > len(chunk):
                file.seek(at)
                chunk, chunk_at, offset = file.read(CHUNK_BYTES), at, 0
            if len(chunk) < offset + DIRECTORY_ENTRY_SIZE or not chunk.startswith(
                DIRECTORY_ENTRY, offset
            ):
                break  # a damaged directory, which zipfile refuses itself
            # An entry: 46 bytes, then its name, extra field and comment, of the lengths it says.
            name, extra, comment = struct.unpack_from("<3H", chunk, offset + 28)
            count += 1
            at += DIRECTORY_ENTRY_SIZE + name + extra + comment
    file.seek(0)
    return count


def _central_directory(file: IO[bytes]) -> tuple[int, int] | None:
    """Where the zip's central directory starts and ends, found as zipfile finds it: the end
    record (the file's last bytes, or before a comment of up to 64 KiB), or the Zip64 end
    record before its locator, gives the directory's size, and the directory ends where those
    records begin (so data before the zip, as a self-extracting one has, moves nothing)."""
    size = size_of(file)
    tail_at = max(0, size - END_RECORD_SIZE - MAX_COMMENT - 1)
    file.seek(tail_at)
    tail = file.read()
    if tail[-END_RECORD_SIZE:].startswith(END_RECORD) and tail.endswith(b"\0\0"):
        at = len(tail) - END_RECORD_SIZE  # no comment
    else:
        at = tail.rfind(END_RECORD)
    if at < 0 or len(tail) < at + END_RECORD_SIZE:
        return None
    (directory_size,) = struct.unpack_from("<L", tail, at + 12)
    end = tail_at + at
    zip64_at = end - ZIP64_LOCATOR_SIZE - ZIP64_END_RECORD_SIZE
    if zip64_at >= 0:
        file.seek(zip64_at)
        records = file.read(ZIP64_END_RECORD_SIZE + ZIP64_LOCATOR_SIZE)
        if records.startswith(ZIP64_END_RECORD) and records.startswith(
            ZIP64_LOCATOR, ZIP64_END_RECORD_SIZE
        ):
            (directory_size,) = struct.unpack_from("<Q", records, 40)
            end = zip64_at
    return (end - directory_size, end) if directory_size <= end else None


def _crowded() -> ImportRefused:
    return ImportRefused(
        "zip_bomb", f"The zip holds over {MAX_ZIP_MEMBERS:,} files: it is not an export."
    )


def _conversations_members(members: list[zipfile.ZipInfo]) -> list[zipfile.ZipInfo]:
    """conversations.json (at the top, or in the one folder of the zip), else its shards
    (conversations-000.json, ... in the folder nearest the top), else its only JSON file."""
    files = [m for m in members if not m.is_dir()]
    for name in CONVERSATION_FILES:
        named = [m for m in files if m.filename.rsplit("/", 1)[-1] == name]
        if named:
            return [min(named, key=lambda m: m.filename.count("/"))]
    shards = [m for m in files if SHARD.fullmatch(m.filename.rsplit("/", 1)[-1])]
    if shards:
        # One export's shards: those of the folder nearest the top (the first, if two are).
        folder = min((m.filename.count("/"), _folder(m)) for m in shards)[1]
        return sorted((m for m in shards if _folder(m) == folder), key=_shard_number)
    json_files = [m for m in files if m.filename.lower().endswith(JSON_SUFFIXES)]
    if len(json_files) == 1:
        return json_files
    raise ImportRefused(
        "wrong_shape", "The zip holds no conversations.json: it is not a chat export."
    )


def _folder(member: zipfile.ZipInfo) -> str:
    return member.filename.rpartition("/")[0]


def _shard_number(member: zipfile.ZipInfo) -> int:
    found = SHARD.fullmatch(member.filename.rpartition("/")[2])
    return int(found.group(1)) if found else 0

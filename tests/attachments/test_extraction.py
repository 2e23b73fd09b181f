"""Issue 27, its first part: a file's kind from its bytes, its name as shown, and its text read in
a child process within limits, hostile files refused with a message that says why, the event
loop never blocked meanwhile."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from django.conf import settings

from conversations.attachments.extraction import Unreadable, extracted_text, extracted_text_sync
from conversations.attachments.kinds import Kind, kind_of
from conversations.attachments.names import shown_name
from tests.support import documents

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 64
JPEG = b"\xff\xd8\xff\xe0" + b"\0" * 64


def test_the_kind_comes_from_the_bytes_never_the_name() -> None:
    assert kind_of(documents.text_pdf(["hello"])) is Kind.PDF
    assert kind_of(documents.docx(["hello"])) is Kind.DOCX
    assert kind_of(PNG) is Kind.PNG and kind_of(JPEG) is Kind.JPEG
    for text in ("plain words\n", "a,b\n1,2\n", '{"json": true}', "def f():\n\treturn 1\n", "é😀"):
        assert kind_of(text.encode()) is Kind.TEXT
    assert kind_of("\ufeffwith a BOM".encode()) is Kind.TEXT
    # An executable, a plain zip (not a Word document), Latin-1, UTF-16, NUL: none is read.
    assert kind_of(b"\x7fELF\x02\x01\x01" + b"\0" * 64) is None
    assert kind_of(b"MZ\x90\x00" + b"\0" * 64) is None
    assert kind_of(documents.docx_with_member(b"PK\x05\x06" + b"\0" * 18, "a.txt", 0)) is None
    assert kind_of("café".encode("latin-1")) is None
    assert kind_of("text".encode("utf-16")) is None
    assert kind_of(b"text\0more") is None
    assert kind_of(b"\x1b" * 10 + b"mostly escapes") is None


def test_a_name_is_shown_without_its_path_or_unseen_characters() -> None:
    assert shown_name("report.pdf") == "report.pdf"
    assert shown_name("../../etc/passwd") == "passwd"
    assert shown_name("..\\..\\boot.ini") == "boot.ini"
    assert shown_name("C:\\Users\\x\\evil.pdf") == "evil.pdf"
    assert shown_name("a\x00b\nc.txt") == "abc.txt"
    assert shown_name("\u202egnp.exe") == "gnp.exe"  # no right-to-left override
    assert shown_name(" résumé.docx ") == "résumé.docx"
    assert shown_name("..") == shown_name("") == shown_name("\x00") == "attachment"
    assert len(shown_name("x" * 500 + ".pdf")) == 200


async def test_a_pdfs_and_a_docxs_text_are_read() -> None:
    pdf = documents.text_pdf(["Quarterly numbers (draft)", "Second page"])
    text = await extracted_text(pdf, Kind.PDF)
    assert "Quarterly numbers (draft)" in text and "Second page" in text
    word = documents.docx(["Meeting notes", "Ship on Friday"], table=[["owner", "alice"]])
    text = await extracted_text(word, Kind.DOCX)
    assert text.splitlines() == ["Meeting notes", "Ship on Friday", "owner\talice"]
    assert extracted_text_sync(word, Kind.DOCX) == text
    assert await extracted_text("naïve,csv\n".encode(), Kind.TEXT) == "naïve,csv\n"


@pytest.mark.parametrize(
    ("make", "kind", "says"),
    [
        (lambda: documents.text_pdf(["cut"])[:-40], Kind.PDF, "could not be read"),
        (lambda: b"%PDF-1.7\n" + b"\x00garbage" * 100, Kind.PDF, "could not be read"),
        (lambda: documents.flate_bomb_pdf(400), Kind.PDF, "larger inside"),
        (lambda: documents.many_pages_pdf(20_000), Kind.PDF, "larger inside"),
        (
            lambda: documents.docx_with_member(documents.docx(["x"]), "word/media/a.bin", 100),
            Kind.DOCX,
            "unpacks to more than 64 MB",
        ),
        (lambda: documents.lying_docx(documents.docx(["x"]), 100), Kind.DOCX, "could not be read"),
        (lambda: documents.docx(["x"])[:-100], Kind.DOCX, "could not be read"),
        (lambda: PNG, Kind.PNG, "no text"),
        (lambda: "café".encode("latin-1"), Kind.TEXT, "not UTF-8"),
    ],
    ids=[
        "truncated-pdf",
        "garbage-pdf",
        "flate-bomb-pdf",
        "20000-pages-pdf",
        "zip-bomb-docx",
        "lying-zip-docx",
        "truncated-docx",
        "image",
        "latin-1-text",
    ],
)
async def test_a_hostile_or_broken_file_is_refused_within_the_limits(
    make: object, kind: Kind, says: str
) -> None:
    data = make()  # type: ignore[operator]
    started = time.monotonic()
    with pytest.raises(Unreadable, match=says):
        await extracted_text(data, kind)
    assert time.monotonic() - started < settings.CHAT_ATTACHMENT_EXTRACT_SECONDS


async def test_a_reader_past_its_memory_or_time_is_stopped(settings: Any) -> None:
    # Pages each within pypdf's limits, together past the reader's memory; then past its time.
    settings.CHAT_ATTACHMENT_EXTRACT_MEMORY_MB = 160
    with pytest.raises(Unreadable, match="needs more than 160 MB"):
        await extracted_text(documents.wide_pages_pdf(20, 19), Kind.PDF)
    settings.CHAT_ATTACHMENT_EXTRACT_MEMORY_MB = 512
    settings.CHAT_ATTACHMENT_EXTRACT_SECONDS = 1
    with pytest.raises(Unreadable, match="took longer than 1 s"):
        await extracted_text(documents.many_pages_pdf(4_900), Kind.PDF)


async def test_reading_never_blocks_the_event_loop() -> None:
    """The loop keeps ticking (every 10 ms asked) all the while a slow file is read: no one gap
    takes a large part of the reading (the reading happens in the child, not here)."""
    gaps: list[float] = []
    started = last = time.monotonic()
    reading = asyncio.ensure_future(extracted_text(documents.many_pages_pdf(4_000), Kind.PDF))
    while not reading.done():
        await asyncio.sleep(0.01)
        now = time.monotonic()
        gaps.append(now - last)
        last = now
    took = time.monotonic() - started
    assert "x" in await reading
    assert len(gaps) >= 20, gaps
    assert max(gaps) < took / 4, (max(gaps), took)

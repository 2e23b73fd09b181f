"""Reads one file's text in a process of its own: `python -m conversations.attachments.worker
KIND MEMORY_MB CPU_SECONDS`, the file on stdin, one JSON object on stdout: {"text": ...} or
{"error": code, "detail": ...}.

It sets its own limits before reading anything (a preexec_fn would, but is unsafe in a threaded
server): its address space (a MemoryError past it), its CPU time (killed past it), no files
written, no core dump. Within them, pypdf's own limits are tightened to what a chat message needs,
and a DOCX's zip is checked before python-docx reads it: python-docx inflates a member whole, so
a zip bomb (or a member whose header lies about its size) would take all the memory it is given.
Imports nothing of Django's: it starts in a fraction of a second.
"""

from __future__ import annotations

import importlib
import io
import json
import resource
import sys
import zipfile

# What a DOCX may unpack to: its text and styles are kilobytes; a megabyte of images is common.
DOCX_MAX_UNPACKED_BYTES = 64 << 20
DOCX_MAX_MEMBERS = 2_000
PDF_MAX_PAGES = 5_000
PDF_MAX_STREAM_BYTES = 20_000_000  # one decompressed stream (a page's content, an image)
# More text than any model's context holds (about a million tokens): refused, never cut. It
# also bounds the answer the server parses.
MAX_TEXT_CHARS = 4_000_000


class TooLarge(Exception):
    """The file unpacks to more than these limits allow."""


def limit(memory_mb: int, cpu_seconds: int) -> None:
    memory = memory_mb << 20
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def pdf_text(data: bytes) -> str:
    from pypdf import PdfReader, apply_configuration  # imported before the limits, see main

    with apply_configuration(
        page_tree_maximum_entries=PDF_MAX_PAGES, zlib_maximum_output_length=PDF_MAX_STREAM_BYTES
    ):
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise ValueError("the PDF is encrypted")
        return "\n\n".join((page.extract_text() or "").strip() for page in reader.pages)


def docx_text(data: bytes) -> str:
    import docx  # imported before the limits, see main
    from docx.table import Table

    check_zip(data)
    document = docx.Document(io.BytesIO(data))
    lines: list[str] = []
    for block in document.iter_inner_content():
        if isinstance(block, Table):
            lines.extend("\t".join(cell.text for cell in row.cells) for row in block.rows)
        else:
            lines.append(block.text)
    return "\n".join(lines)


def check_zip(data: bytes) -> None:
    """Refuse a zip that declares too much, and read every member a megabyte at a time: a read
    stops at the size the member declares, so one whose header lies fails its CRC check there,
    rather than inflating whatever it holds."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        members = archive.infolist()
        if len(members) > DOCX_MAX_MEMBERS:
            raise TooLarge(f"it holds more than {DOCX_MAX_MEMBERS} parts")
        if sum(member.file_size for member in members) > DOCX_MAX_UNPACKED_BYTES:
            raise TooLarge(f"it unpacks to more than {DOCX_MAX_UNPACKED_BYTES >> 20} MB")
        for member in members:
            with archive.open(member) as part:
                while part.read(1 << 20):
                    pass


READERS = {"pdf": pdf_text, "docx": docx_text}
LIBRARIES = {"pdf": ["pypdf"], "docx": ["docx", "docx.table"]}


def main() -> None:
    kind, memory_mb, cpu_seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    # The reader's library first: under the limits, an import that cannot map its shared
    # objects would pass for the file's fault. The limits then hold for the file's reading.
    for library in LIBRARIES[kind]:
        importlib.import_module(library)
    limit(memory_mb, cpu_seconds)
    data = sys.stdin.buffer.read()
    try:
        text = READERS[kind](data)
        if len(text) > MAX_TEXT_CHARS:
            raise TooLarge(f"it holds more than {MAX_TEXT_CHARS:,} characters of text")
        result = {"text": text}
    except MemoryError:
        data = b""
        result = {"error": "memory", "detail": ""}
    except TooLarge as exc:
        result = {"error": "too_large", "detail": str(exc)}
    except Exception as exc:  # a hostile or broken file: whatever the library raised
        name = type(exc).__name__
        result = {"error": "too_large" if name == "LimitReachedError" else "unreadable"}
        result["detail"] = str(exc)[:300]
    sys.stdout.write(json.dumps(result))


if __name__ == "__main__":
    main()

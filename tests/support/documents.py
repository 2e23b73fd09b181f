"""Documents made by the tests: PDFs written byte by byte (no generator to install), DOCX files by
python-docx, and the hostile ones built from them: compression bombs, zips that lie, page trees
too large."""

from __future__ import annotations

import io
import struct
import zipfile
import zlib


def pdf(objects: list[bytes]) -> bytes:
    """A PDF of these objects (object i + 1 is objects[i]; 1 is the catalog), with its xref."""
    out = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def _stream(data: bytes, extra: bytes = b"") -> bytes:
    return b"<< /Length %d %s >>\nstream\n" % (len(data), extra) + data + b"\nendstream"


FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"


def _page(contents: int) -> bytes:
    return (
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
        b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % contents
    )


def text_pdf(pages: list[str]) -> bytes:
    """A PDF with a line of text on each page."""
    kids = b" ".join(b"%d 0 R" % (4 + 2 * i) for i in range(len(pages)))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, len(pages)),
        FONT,
    ]
    for index, line in enumerate(pages):
        escaped = line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        objects.append(_page(5 + 2 * index))
        objects.append(
            _stream(b"BT /F1 12 Tf 72 720 Td (" + escaped.encode("latin-1") + b") Tj ET")
        )
    return pdf(objects)


def flate_bomb_pdf(mib: int) -> bytes:
    """One page whose content stream inflates to `mib` MiB of zeros (about 1,000 times smaller)."""
    squeeze = zlib.compressobj(9)
    zeros = b"\0" * (1 << 20)
    data = b"".join([squeeze.compress(zeros) for _ in range(mib)] + [squeeze.flush()])
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
        FONT,
        _page(5),
        _stream(data, b"/Filter /FlateDecode"),
    ]
    return pdf(objects)


def wide_pages_pdf(pages: int, mib: int) -> bytes:
    """Pages whose content streams each inflate to `mib` MiB of spaces: each under a stream's
    limit, together more than a reader's memory."""
    squeeze = zlib.compressobj(9)
    spaces = b" " * (1 << 20)
    data = b"".join([squeeze.compress(spaces) for _ in range(mib)] + [squeeze.flush()])
    kids = b" ".join(b"%d 0 R" % (4 + 2 * i) for i in range(pages))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, pages),
        FONT,
    ]
    for index in range(pages):
        objects += [_page(5 + 2 * index), _stream(data, b"/Filter /FlateDecode")]
    return pdf(objects)


def many_pages_pdf(count: int) -> bytes:
    """`count` pages sharing one content stream: small on disk, a large page tree to walk."""
    kids = b" ".join(b"%d 0 R" % (5 + i) for i in range(count))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, count),
        FONT,
        _stream(b"BT /F1 12 Tf 72 720 Td (x) Tj ET"),
    ]
    return pdf(objects + [_page(4)] * count)


def docx(paragraphs: list[str], table: list[list[str]] | None = None) -> bytes:
    import docx as python_docx

    document = python_docx.Document()
    for text in paragraphs:
        document.add_paragraph(text)
    if table:
        grid = document.add_table(rows=len(table), cols=len(table[0]))
        for row, cells in zip(grid.rows, table, strict=True):
            for cell, text in zip(row.cells, cells, strict=True):
                cell.text = text
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def docx_with_member(data: bytes, name: str, size_mib: int) -> bytes:
    """The DOCX with one more part of `size_mib` MiB of zeros (deflated to a few kilobytes)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w") as target:
        for member in source.infolist():
            target.writestr(member, source.read(member))
        info = zipfile.ZipInfo(name)
        info.compress_type = zipfile.ZIP_DEFLATED
        with target.open(info, "w") as part:
            for _ in range(size_mib):
                part.write(b"\0" * (1 << 20))
    return out.getvalue()


def lying_docx(data: bytes, size_mib: int) -> bytes:
    """The DOCX with a part that inflates to `size_mib` MiB while its headers say 2,000 bytes."""
    bomb = bytearray(docx_with_member(data, "word/media/filler.bin", size_mib))
    name = b"word/media/filler.bin"
    # The size fields of the part's local header (offset 22) and central directory entry (24).
    for signature, size_at, name_length_at, header in (
        (b"PK\x03\x04", 22, 26, 30),
        (b"PK\x01\x02", 24, 28, 46),
    ):
        start = 0
        while (start := bomb.find(signature, start)) != -1:
            length = struct.unpack_from("<H", bomb, start + name_length_at)[0]
            if bomb[start + header : start + header + length] == name:
                struct.pack_into("<I", bomb, start + size_at, 2000)
            start += 4
    return bytes(bomb)

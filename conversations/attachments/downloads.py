"""A stored file as a download, read a chunk at a time on a thread.

Django's FileResponse iterates its file synchronously, and under ASGI a synchronous iterator is
read into memory whole before the first byte goes out; this response's iterator is asynchronous,
so a download holds one chunk in memory however large the file, and never blocks the event loop.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import IO

from asgiref.sync import sync_to_async
from django.http import StreamingHttpResponse
from django.utils.http import content_disposition_header

CHUNK_BYTES = 256 * 1024


def file_download(
    stored: IO[bytes], *, filename: str, content_type: str, size: int | None = None
) -> StreamingHttpResponse:
    """`stored` (open, read from where it stands; closed at the end) as an attachment named
    `filename`: a file is data to save, never a page of this site."""
    response = StreamingHttpResponse(_chunks(stored), content_type=content_type)
    response["Content-Disposition"] = content_disposition_header(True, filename)
    if size is not None:
        response["Content-Length"] = str(size)
    response["Content-Security-Policy"] = "sandbox; default-src 'none'"
    response["Cache-Control"] = "private, no-store"
    return response


async def _chunks(stored: IO[bytes]) -> AsyncIterator[bytes]:
    read = sync_to_async(stored.read, thread_sensitive=False)
    try:
        while chunk := await read(CHUNK_BYTES):
            yield chunk
    finally:
        await sync_to_async(stored.close, thread_sensitive=False)()

"""Slow readers of /api/export.jsonl against a real daphne process: its memory stays bounded.

daphne's send() never waits for the client: what a response produces sits in Twisted's write
buffer until the socket takes it. A streamed export of the whole history therefore ended up in
the server's memory, once per slow reader. Bounded pages keep that to a page per reader.
"""

from __future__ import annotations

import json
import re
import socket
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings

from conversations.services.tokens import api_token_create
from tests.support.history import in_export_order, make_history
from tests.support.servers import ServerProcess, servers

pytestmark = [
    pytest.mark.processes,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        "postgresql" not in settings.DATABASES["default"]["ENGINE"],
        reason="needs a PostgreSQL DATABASE_URL (daphne reads the test's database)",
    ),
]

MB = 1024 * 1024
# 2,000 conversations of 4 messages of 10,000 characters: 76 MB of message text (MB: MiB here),
# about 80 MB of JSON lines.
CONVERSATIONS, MESSAGES, MESSAGE_CHARS = 2000, 4, 10_000
HISTORY_BYTES = CONVERSATIONS * MESSAGES * MESSAGE_CHARS
PAGE_BYTES = 1 * MB
READERS = 4
HANG_S = 6.0
# What a slow reader may cost: its page waiting in daphne's write buffer, and what building it took
# (the batch of rows, the page's lines and their join), which the allocator may keep: about four
# pages. Measured: 16.7 MB for 4 readers of 1 MB pages (40 MB with the default 4 MB pages). Allowed:
# that plus 16 MB of slack, 32 MB, under half the history. The streamed export grew by each reader's
# whole export instead (READERS x 80 MB): about 210 MB within these 6 s, still climbing.
MAX_GROWTH = READERS * 4 * PAGE_BYTES + 16 * MB


def request(server: ServerProcess, key: str) -> bytes:
    return (
        f"GET /api/export.jsonl HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
        f"Authorization: Bearer {key}\r\nConnection: close\r\n\r\n"
    ).encode()


def slow_reader(server: ServerProcess, key: str) -> socket.socket:
    """A client that asks for the export and then hardly reads: a receive buffer of a few kB."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: sets the window
    sock.settimeout(10)
    sock.connect(("127.0.0.1", server.port))
    sock.sendall(request(server, key))
    return sock


def peak_rss_while_hanging(
    server: ServerProcess, readers: list[socket.socket]
) -> tuple[int, list[bytes]]:
    """The server's peak RSS while each reader takes 1 kB every 0.25 s; and what each got."""
    peak, received = server.rss(), [b""] * len(readers)
    deadline = time.monotonic() + HANG_S
    while time.monotonic() < deadline:
        for i, sock in enumerate(readers):
            received[i] += sock.recv(1024)
        peak = max(peak, server.rss())
        time.sleep(0.25)
    return peak, received


def next_url(response: httpx.Response) -> str | None:
    match = re.fullmatch(r'<([^>]+)>; rel="next"', response.headers.get("Link", ""))
    return match[1] if match else None


def test_slow_readers_leave_the_server_with_a_page_each_not_the_history(
    alice: Any, charlie: Any, tmp_path: Path
) -> None:
    make_history(alice, CONVERSATIONS, MESSAGES, "x" * MESSAGE_CHARS, batch_size=500)
    make_history(charlie, 5, 2, title="charlie's")
    key = api_token_create(user=alice, name="slow reader")[1]
    bearer = {"Authorization": f"Bearer {key}"}

    with servers(1, tmp_path, CHAT_EXPORT_PAGE_BYTES=PAGE_BYTES) as (server,):
        # Warm up (imports, database pool, serializers) on an empty export, then measure.
        empty = httpx.get(
            f"{server.origin}/api/export.jsonl?until=2000-01-01T00:00:00Z", headers=bearer
        )
        assert empty.status_code == 200 and empty.content == b""
        time.sleep(0.5)
        before = server.rss()

        readers = [slow_reader(server, key) for _ in range(READERS)]
        try:
            peak, received = peak_rss_while_hanging(server, readers)
        finally:
            for sock in readers:
                sock.close()

        growth = peak - before
        print(
            f"RSS before {before / MB:.0f} MB, peak {peak / MB:.0f} MB, growth {growth / MB:.1f} MB"
        )
        # Each had its answer started, and took only a little of it.
        assert all(r.startswith(b"HTTP/1.1 200 ") and len(r) < 64 * 1024 for r in received)
        assert growth < MAX_GROWTH, (
            f"daphne grew {growth / MB:.0f} MB for {READERS} slow readers of a "
            f"{HISTORY_BYTES / MB:.0f} MB history (allowed {MAX_GROWTH / MB:.0f} MB)"
        )

        # A reader that keeps up follows the pages to the end and gets every conversation once.
        exported: list[str] = []
        url: str | None = f"{server.origin}/api/export.jsonl"
        with httpx.Client(headers=bearer, timeout=30) as client:
            while url is not None:
                response = client.get(url)
                assert response.status_code == 200, response.text[:500]
                exported += [json.loads(line)["id"] for line in response.text.splitlines()]
                url = next_url(response)

    assert exported == in_export_order(alice)

"""Issue 23, finding 14: a request body is limited before it is read, per route (the import's
limit for imports, DATA_UPLOAD_MAX_MEMORY_SIZE elsewhere): refused 413 from its Content-Length,
and cut off once a body streamed without one passes the limit. An unauthenticated 300 MB POST
used to be read whole (written twice to the temporary directory) before its 401. And a multipart
body with no parts got daphne's bare 400, with no body and no Content-Type, before the API saw it.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import select
import socket
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from conversations.services.tokens import api_token_create
from tests.support.db import close_worker_connections
from tests.support.launch import ASGI_SERVERS
from tests.support.servers import NEEDS_SHARED_SERVICES, servers

pytestmark = pytest.mark.django_db(transaction=True)

MB = 1024 * 1024
SMALL_LIMIT = 16 * 1024  # DATA_UPLOAD_MAX_MEMORY_SIZE in these tests: the limit off the imports
IMPORT_LIMIT = 4096  # CHAT_IMPORT_MAX_BYTES; the multipart body may add 64 KiB of fields
CHUNK = 16 * 1024


class Body:
    """A request body of `size` bytes, given `CHUNK` at a time, that counts what was taken."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.taken = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while self.taken < self.size:
            piece = min(CHUNK, self.size - self.taken)
            self.taken += piece
            yield b"x" * piece


@pytest.fixture
def application(db: Any, settings: Any) -> Any:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = SMALL_LIMIT
    settings.CHAT_IMPORT_MAX_BYTES = IMPORT_LIMIT
    settings.CHAT_GATEWAY_MAX_BODY_BYTES = SMALL_LIMIT
    return importlib.import_module("chatsite.asgi").application  # settles dead replies: sync


async def post(application: Any, path: str, body: Body, *, declared: bool) -> httpx.Response:
    """POST `body` to `path` through the ASGI application, with no credentials: with its
    Content-Length, or streamed without one (chunked)."""
    headers = {"Content-Type": "application/octet-stream"}
    if declared:
        headers["Content-Length"] = str(body.size)
    transport = httpx.ASGITransport(app=application)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        response = await client.post(path, content=body, headers=headers)
    await close_worker_connections()
    return response


async def test_finding_14_a_declared_length_over_the_limit_is_refused_before_a_byte_is_read(
    application: Any,
) -> None:
    body = Body(300 * MB)
    response = await post(application, "/api/conversations/", body, declared=True)

    assert (response.status_code, body.taken) == (413, 0)
    assert response.headers["Content-Type"] == "application/json"
    assert response.json() == {
        "code": "too_large",
        "detail": "The request body is 300.0 MB; requests here are limited to 16.0 KB.",
    }


async def test_finding_14_a_streamed_body_is_cut_off_once_it_passes_the_limit(
    application: Any,
) -> None:
    body = Body(8 * MB)
    response = await post(application, "/v1/chat/completions", body, declared=False)

    assert response.status_code == 413
    assert body.taken <= SMALL_LIMIT + CHUNK, f"{body.taken} bytes were read"
    assert response.json() == {
        "error": {
            "message": "The request body is over 16.0 KB, the limit of requests here.",
            "type": "invalid_request_error",
            "param": None,
            "code": "too_large",
        }
    }


async def test_an_import_may_send_the_import_s_limit_and_no_more(application: Any) -> None:
    allowed = Body(2 * SMALL_LIMIT)  # over the small limit, within the import's
    answered = await post(application, "/api/imports/", allowed, declared=True)
    assert answered.status_code == 401, "read and answered by the API: nobody signed in"
    assert allowed.taken == allowed.size

    body = Body(2 * MB)
    refused = await post(application, "/api/imports/", body, declared=True)
    assert (refused.status_code, body.taken) == (413, 0)
    assert refused.json() == {
        "code": "too_large",
        "detail": "The upload is 2.0 MB; imports are limited to 4.0 KB.",
    }

    page = await post(application, "/settings/import/", Body(2 * MB), declared=False)
    assert page.status_code == 413
    assert page.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert page.text == "The upload is over 4.0 KB, the limit of imports.\n"


async def test_a_body_within_the_limit_goes_on_to_the_application(application: Any) -> None:
    body = Body(SMALL_LIMIT)
    response = await post(application, "/api/conversations/", body, declared=True)

    assert response.status_code == 401, "read and answered by the API: nobody signed in"
    assert body.taken == body.size


# --- The same through the ASGI servers, which read the body themselves ---------------------


def exchange(port: int, head: str, chunks: Sequence[bytes] = (), timeout: float = 10.0) -> bytes:
    """Send `head` (a request line and headers, lines ending in \\n) and then `chunks`, stopping
    as soon as the server answers; what the server sent until it closed the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(head.replace("\n", "\r\n").encode() + b"\r\n")
        for chunk in chunks:
            if select.select([sock], [], [], 0.05)[0]:
                break  # answered: the rest would not be read
            sock.sendall(chunk)
        answer = b""
        with contextlib.suppress(TimeoutError, ConnectionResetError):
            while data := sock.recv(65536):
                answer += data
        return answer


def parsed(answer: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = answer.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines)}
    return int(status_line.split()[1]), headers, body


@pytest.mark.processes
@NEEDS_SHARED_SERVICES
@pytest.mark.parametrize("asgi_server", ASGI_SERVERS)
def test_finding_14_the_servers_refuse_before_reading_and_leave_forms_to_the_application(
    alice: Any, tmp_path: Path, asgi_server: str
) -> None:
    key = api_token_create(user=alice, name="bodies")[1]
    with servers(1, tmp_path, server=asgi_server, CHAT_IMPORT_MAX_BYTES=IMPORT_LIMIT) as (srv,):
        # 300 MB declared and none sent: the answer comes without waiting for the body.
        status, headers, body = parsed(
            exchange(
                srv.port,
                "POST /api/conversations/ HTTP/1.1\nHost: 127.0.0.1\n"
                "Content-Type: application/json\nContent-Length: 314572800\n",
                timeout=5,
            )
        )
        assert status == 413
        assert headers["content-type"] == "application/json"
        assert json.loads(body)["code"] == "too_large"

        # An import streamed past its limit is cut off there.
        chunk = f"{CHUNK:x}\r\n".encode() + b"x" * CHUNK + b"\r\n"
        status, _, body = parsed(
            exchange(
                srv.port,
                "POST /api/imports/ HTTP/1.1\nHost: 127.0.0.1\n"
                "Content-Type: multipart/form-data; boundary=B\nTransfer-Encoding: chunked\n",
                [chunk] * 64 + [b"0\r\n\r\n"],  # 1 MB
            )
        )
        assert status == 413
        assert json.loads(body)["detail"] == "The upload is over 4.0 KB, the limit of imports."

        # A multipart body with no parts reaches the API, which answers it in JSON.
        status, headers, body = parsed(
            exchange(
                srv.port,
                f"POST /api/imports/ HTTP/1.1\nHost: 127.0.0.1\nAuthorization: Bearer {key}\n"
                "Content-Type: multipart/form-data; boundary=B\nContent-Length: 7\n"
                "Connection: close\n\n--B--",
            )
        )
        assert status == 400
        assert headers["content-type"] == "application/json"
        assert json.loads(body) == {"code": "no_file", "detail": "file: No file was submitted."}


async def test_the_gateway_may_take_its_own_limit_for_files(
    application: Any, settings: Any
) -> None:
    settings.CHAT_GATEWAY_MAX_BODY_BYTES = 4 * SMALL_LIMIT  # room for base64 files
    allowed = Body(2 * SMALL_LIMIT)  # over Django's limit elsewhere, within the gateway's
    answered = await post(application, "/v1/chat/completions", allowed, declared=True)
    assert answered.status_code == 401, "read and answered by the gateway: no API token"
    assert allowed.taken == allowed.size

    elsewhere = await post(application, "/api/conversations/", Body(2 * SMALL_LIMIT), declared=True)
    assert elsewhere.status_code == 413

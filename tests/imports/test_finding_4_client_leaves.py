"""Issue 23, finding 4: an import went on after its client left, reading and writing for nobody
while it held the user's import slot. It now stops between two conversations once the server
says the client disconnected (chatsite/client_left.py): nothing is kept, unless keep_partial."""

from __future__ import annotations

import http.client
import io
import itertools
import json
import socket
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from chatsite.client_left import ClientLeft
from conversations.imports.departure import CLIENT_LEFT, client_left
from conversations.imports.importer import import_history
from conversations.imports.source import ClientLeft as ImportStopped
from conversations.models import Conversation
from conversations.services.tokens import api_token_create
from tests.imports.sources import as_json, claude_conversation
from tests.support.servers import servers

CONVERSATIONS = 6


def a_file(count: int, prefix: str = "5ca1ab1e") -> bytes:
    return as_json([claude_conversation(f"{prefix}-0000-4000-8000-{i:012d}") for i in range(count)])


def after_calls(count: int) -> Any:
    """A client_left() that says the client left once it has been asked `count` times."""
    asked = itertools.count(1)
    return lambda: next(asked) > count


@pytest.mark.django_db
def test_finding_4_an_import_stops_once_its_client_has_left_and_keeps_nothing(alice: Any) -> None:
    with pytest.raises(ImportStopped) as stopped:
        import_history(owner=alice, file=_file(a_file(CONVERSATIONS)), client_left=after_calls(3))
    assert stopped.value.code == "client_left"
    assert not Conversation.objects.filter(owner=alice).exists()
    # The slot is free: the next import runs.
    report = import_history(owner=alice, file=_file(a_file(1, "0be11e00")))
    assert len(report.imported) == 1


@pytest.mark.django_db
def test_finding_4_with_keep_partial_what_came_before_the_client_left_is_kept(alice: Any) -> None:
    report = import_history(
        owner=alice,
        file=_file(a_file(CONVERSATIONS)),
        keep_partial=True,
        client_left=after_calls(3),
    )
    assert len(report.imported) == 3
    assert "the client that sent the file is gone" in report.stopped
    assert Conversation.objects.filter(owner=alice).count() == 3


async def test_finding_4_the_scope_says_when_the_server_reported_the_client_gone() -> None:
    seen: dict[str, Any] = {}
    messages = [{"type": "http.request", "body": b"", "more_body": False}]
    messages.append({"type": "http.disconnect"})

    async def receive() -> dict[str, Any]:
        return messages.pop(0)

    async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
        request = type("Request", (), {"scope": scope})()
        seen["left"] = left = client_left(request)
        await receive()
        seen["after the body"] = left()
        await receive()
        seen["after the disconnect"] = left()

    await ClientLeft(application)({"type": "http", "path": "/"}, receive, None)
    assert seen == {"left": seen["left"], "after the body": False, "after the disconnect": True}
    assert CLIENT_LEFT not in {"type": "http"}  # the caller's scope is not changed


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(
    "postgresql" not in settings.DATABASES["default"]["ENGINE"],
    reason="needs a PostgreSQL DATABASE_URL (daphne reads the test's database)",
)
def test_finding_4_a_live_server_stops_the_import_of_a_client_that_left(
    alice: Any, tmp_path: Path
) -> None:
    """On daphne: a long import whose client hangs up stops, frees the user's slot at once
    (the next import is not told another one is running) and keeps nothing."""
    _, key = api_token_create(user=alice, name="import")
    with servers(1, tmp_path) as (server,):
        long_import = _upload(a_file(4000), key)
        hang_up = _send_without_reading(server.port, long_import)
        _wait_until_importing(alice)
        hang_up.close()
        started = time.monotonic()
        while True:
            status, body = _post(server.port, _upload(a_file(1, "0be11e00"), key))
            if status != 429:
                break
            assert time.monotonic() - started < 15, "the import went on after its client left"
            time.sleep(0.2)
        assert status == 201, body
    titles = set(Conversation.objects.filter(owner=alice).values_list("external_id", flat=True))
    assert titles == {"0be11e00-0000-4000-8000-000000000000"}, "nothing of the first was kept"


def _file(data: bytes) -> io.BytesIO:
    return io.BytesIO(data)


def _upload(data: bytes, key: str) -> tuple[bytes, dict[str, str]]:
    boundary = uuid.uuid4().hex
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="c.json"\r\n'
            "Content-Type: application/json\r\n\r\n"
        ).encode()
        + data
        + f"\r\n--{boundary}--\r\n".encode()
    )
    headers = {
        "Content-Type": f"multipart/form-data; boundary={boundary}",
        "Authorization": f"Bearer {key}",
        "Content-Length": str(len(body)),
    }
    return body, headers


def _send_without_reading(port: int, request: tuple[bytes, dict[str, str]]) -> socket.socket:
    body, headers = request
    client = socket.create_connection(("127.0.0.1", port), timeout=10)
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    client.sendall(f"POST /api/imports/ HTTP/1.1\r\nHost: 127.0.0.1\r\n{head}\r\n".encode() + body)
    return client


def _post(port: int, request: tuple[bytes, dict[str, str]]) -> tuple[int, Any]:
    body, headers = request
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("POST", "/api/imports/", body=body, headers=headers)
        response = connection.getresponse()
        return response.status, json.loads(response.read() or b"null")
    finally:
        connection.close()


def _wait_until_importing(owner: Any) -> None:
    """Until the import is well into its conversations: they are written inside its
    transaction, so nothing shows from outside but the time it takes (IMPORT_S and more)."""
    time.sleep(1.5)

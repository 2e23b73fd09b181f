"""One client flooding frames at a real server process (daphne, then uvicorn): the server stops
reading it, closes it, and keeps serving everyone else, without holding the flood in memory."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from channels.db import database_sync_to_async
from websockets.exceptions import ConnectionClosed

from conversations.models import Conversation
from conversations.sockets.consumer import CLOSE_POLICY_VIOLATION
from tests.support.servers import NEEDS_SHARED_SERVICES, open_socket, servers, session_cookie
from tests.support.sockets import LiveSocket

pytestmark = [
    pytest.mark.processes,
    pytest.mark.django_db(transaction=True),
    NEEDS_SHARED_SERVICES,
]

MB = 1024 * 1024
FLOOD_S = 3.0


async def flood(ws: Any) -> tuple[int, int | None]:
    """Send Stop frames as fast as the connection takes them; the frames sent and the close code
    the server gave, if it closed the socket."""
    sent, deadline = 0, time.monotonic() + FLOOD_S
    frame = '{"action": "cancel"}'
    try:
        while time.monotonic() < deadline:
            await ws.send(frame)
            sent += 1
            if sent % 100 == 0:
                await asyncio.sleep(0)  # let the reader see a close
    except ConnectionClosed:
        pass
    return sent, ws.close_code


@pytest.mark.parametrize("asgi_server", ["daphne", "uvicorn"])
async def test_a_flooding_socket_is_closed_and_others_are_served_meanwhile(
    alice: Any, users: dict[str, Any], conversation: Conversation, tmp_path: Path, asgi_server: str
) -> None:
    bob = users["bob"]
    bobs = await database_sync_to_async(Conversation.objects.create)(owner=bob)
    alice_cookie = await database_sync_to_async(session_cookie)(alice)
    bob_cookie = await database_sync_to_async(session_cookie)(bob)
    with servers(1, tmp_path, server=asgi_server) as (server,):
        async with (
            open_socket(server, conversation.pk, alice_cookie) as flooder,
            open_socket(server, bobs.pk, bob_cookie) as other,
        ):
            before = server.rss()
            flooding = asyncio.create_task(flood(flooder))
            await asyncio.sleep(0.5)
            bobs_socket = LiveSocket(other)
            await bobs_socket.send(action="cancel")
            answer = await bobs_socket.receive(timeout=5)
            sent, code = await flooding
            grown = server.rss() - before

    assert answer["code"] == "nothing_to_cancel", "bob's frame was answered during the flood"
    assert code == CLOSE_POLICY_VIOLATION, f"the flood ({sent:,} frames) was closed"
    # Daphne alone would have read and queued every frame the client sent (MBs a second); with
    # chatsite's backpressure (uvicorn: its own bounded queue) it holds a read's worth a socket.
    assert grown < 20 * MB, f"{asgi_server} grew by {grown / MB:.1f} MB during the flood"

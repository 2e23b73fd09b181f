"""The test client of the conversation socket, in two transports, and the predicates on its events.

`Socket` talks to the consumer in this process (channels' WebsocketCommunicator); `LiveSocket`
talks to a real server over a real WebSocket (tests/support/servers.py starts one). Both speak
the JSON subprotocol and share `receive_until`.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Callable
from typing import Any

from autobahn.exception import PayloadExceededError
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from daphne.server import Server
from django.contrib.sessions.backends.db import SessionStore
from django.test import Client
from websockets.asyncio.client import ClientConnection
from websockets.asyncio.client import connect as websocket_connect

from conversations.sockets.renderers import JSON_SUBPROTOCOL
from conversations.sockets.routing import websocket_urlpatterns

Event = dict[str, Any]


def finished(event: Event) -> bool:
    return event["type"] == "message.finished"


def started(event: Event) -> bool:
    return event["type"] == "message.started"


def is_delta(event: Event) -> bool:
    return event["type"] == "message.delta"


def streamed_text(events: list[Event]) -> str:
    """The reply text as a client assembles it from snapshots and offset deltas."""
    text = ""
    for event in events:
        if event["type"] == "message.snapshot":
            text = event["text"]
        elif event["type"] == "message.delta":
            assert event["offset"] == len(text), "a delta must start where the text so far ends"
            text += event["text"]
    return text


class EventSocket:
    """What both transports share: JSON frames out, events in, read until one matches."""

    receive_timeout_s: float
    until_timeout_s: float

    async def send(self, **frame: Any) -> None:
        raise NotImplementedError

    async def receive(self, timeout: float | None = None) -> Event:
        raise NotImplementedError

    async def receive_until(
        self, predicate: Callable[[Event], bool], timeout: float | None = None
    ) -> list[Event]:
        """Every event up to and including the first that matches."""
        timeout = self.until_timeout_s if timeout is None else timeout
        events: list[Event] = []
        async with asyncio.timeout(timeout):
            while True:
                event = await self.receive(timeout=timeout)
                events.append(event)
                if predicate(event):
                    return events


class Socket(EventSocket):
    """A client of the conversation consumer running in this process."""

    receive_timeout_s = 5
    until_timeout_s = 10

    def __init__(self, communicator: WebsocketCommunicator):
        self.communicator = communicator

    async def send(self, **frame: Any) -> None:
        await self.communicator.send_to(text_data=json.dumps(frame))

    async def receive(self, timeout: float | None = None) -> Event:
        timeout = self.receive_timeout_s if timeout is None else timeout
        return json.loads(await self.communicator.receive_from(timeout=timeout))

    async def nothing_within(self, seconds: float) -> bool:
        """True if the socket sends nothing for that long (the connection stays open)."""
        return bool(await self.communicator.receive_nothing(timeout=seconds))

    async def close(self) -> None:
        await self.communicator.disconnect()


class LiveSocket(EventSocket):
    """A client of a live server's conversation socket (tests/support/servers.py's open_socket)."""

    receive_timeout_s = 10
    until_timeout_s = 20

    def __init__(self, connection: ClientConnection):
        self.connection = connection

    async def send(self, **frame: Any) -> None:
        await self.connection.send(json.dumps(frame))

    async def receive(self, timeout: float | None = None) -> Event:
        timeout = self.receive_timeout_s if timeout is None else timeout
        return json.loads(await asyncio.wait_for(self.connection.recv(), timeout))


def signed_in_session(user: Any) -> str:
    """The key of a real session signing `user` in, as the login view leaves it (touches the
    database: call it from sync code or through database_sync_to_async)."""
    client = Client()
    client.force_login(user)
    return str(client.session.session_key)


def conversation_communicator(
    user: Any,
    conversation_id: Any,
    *,
    session_key: str | None = None,
    json_protocol: bool = True,
    application: Any = None,
) -> WebsocketCommunicator:
    """A communicator on a conversation's socket path, authenticated as `user` with the session
    `session_key` (see signed_in_session; sockets re-check it before every frame)."""
    communicator = WebsocketCommunicator(
        application or URLRouter(websocket_urlpatterns),
        f"/ws/conversations/{conversation_id}/",
        subprotocols=[JSON_SUBPROTOCOL] if json_protocol else [],
    )
    communicator.scope["user"] = user
    communicator.scope["session"] = SessionStore(session_key)
    return communicator


# Daphne refuses to send a message longer than this (its default, which chatsite keeps).
DAPHNE_MAX_MESSAGE_BYTES: int = (
    inspect.signature(Server).parameters["websocket_max_message_size"].default
)


def refusing_frames_as_daphne_does(application: Any) -> Any:
    """`application` behind daphne's rule for outgoing frames: one over its limit raises
    autobahn's PayloadExceededError in the handler that sends it."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        async def send_within_the_limit(message: dict[str, Any]) -> None:
            size = len((message.get("text") or "").encode())
            if message["type"] == "websocket.send" and size > DAPHNE_MAX_MESSAGE_BYTES:
                raise PayloadExceededError(
                    f"tried to send WebSocket message with size {size} exceeding payload "
                    f"limit of {DAPHNE_MAX_MESSAGE_BYTES} octets"
                )
            await send(message)

        await application(scope, receive, send_within_the_limit)

    return app


def open_page_socket(server: Any, conversation_id: Any, cookie: str) -> Any:
    """A socket as the conversation's page opens it: HTML fragments, sent the latest reply."""
    return websocket_connect(
        f"ws://127.0.0.1:{server.port}/ws/conversations/{conversation_id}/",
        additional_headers={"Cookie": cookie, "Origin": server.origin},
        open_timeout=10,
    )

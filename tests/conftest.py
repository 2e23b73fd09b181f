from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.layers import channel_layers
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.db import connections

from conversations.engines import BACKENDS, get_engine, reset_engines
from conversations.models import Conversation
from conversations.renderers import JSON_SUBPROTOCOL
from conversations.routing import websocket_urlpatterns


@pytest.fixture(autouse=True)
def scripted_engine(settings: Any) -> Any:
    """Every test runs on the scripted engine unless it picks another one."""
    settings.CHAT_ENGINE = "scripted"
    # Users are created in most tests; real password hashing would dominate their run time.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.CHAT_SCRIPTED_TOKENS = 40
    settings.CHAT_SCRIPTED_DELAY_MS = 10
    reset_engines()
    channel_layers.backends.clear()
    yield get_engine("scripted")
    reset_engines()
    channel_layers.backends.clear()


@pytest.fixture
def stepped_engine(settings: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The engine the test drives token by token (tests/support/stepped.py)."""
    monkeypatch.setitem(BACKENDS, "stepped", "tests.support.stepped")
    settings.CHAT_ENGINE = "stepped"
    reset_engines()
    return get_engine("stepped")


@pytest.fixture
def users(db: Any) -> dict[str, Any]:
    """alice owns things, bob is another user, charlie should have no access to alice's stuff."""
    User = get_user_model()
    return {
        name: User.objects.create_user(name, f"{name}@example.com", f"{name}-password")
        for name in ("alice", "bob", "charlie")
    }


@pytest.fixture
def alice(users: dict[str, Any]) -> Any:
    return users["alice"]


@pytest.fixture
def charlie(users: dict[str, Any]) -> Any:
    return users["charlie"]


@pytest.fixture
def conversation(alice: Any) -> Conversation:
    return Conversation.objects.create(owner=alice, title="Alice's chat")


class Socket:
    """A test client of the conversation socket speaking the JSON subprotocol."""

    def __init__(self, communicator: WebsocketCommunicator):
        self.communicator = communicator

    async def send(self, **frame: Any) -> None:
        await self.communicator.send_to(text_data=json.dumps(frame))

    async def receive(self, timeout: float = 5) -> dict[str, Any]:
        return json.loads(await self.communicator.receive_from(timeout=timeout))

    async def nothing_within(self, seconds: float) -> bool:
        """True if the socket sends nothing for that long (the connection stays open)."""
        return bool(await self.communicator.receive_nothing(timeout=seconds))

    async def receive_until(
        self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 10
    ) -> list[dict[str, Any]]:
        """Every event up to and including the first that matches."""
        events: list[dict[str, Any]] = []
        async with asyncio.timeout(timeout):
            while True:
                event = await self.receive(timeout=timeout)
                events.append(event)
                if predicate(event):
                    return events

    async def close(self) -> None:
        await self.communicator.disconnect()


def finished(event: dict[str, Any]) -> bool:
    return event["type"] == "message.finished"


def started(event: dict[str, Any]) -> bool:
    return event["type"] == "message.started"


def is_delta(event: dict[str, Any]) -> bool:
    return event["type"] == "message.delta"


def streamed_text(events: list[dict[str, Any]]) -> str:
    """The reply text as a client assembles it from snapshots and offset deltas."""
    text = ""
    for event in events:
        if event["type"] == "message.snapshot":
            text = event["text"]
        elif event["type"] == "message.delta":
            assert event["offset"] == len(text), "a delta must start where the text so far ends"
            text += event["text"]
    return text


@pytest.fixture
async def connect() -> AsyncIterator[Callable[..., Any]]:
    opened: list[WebsocketCommunicator] = []

    async def _connect(
        user: Any, conversation_id: Any, *, json_protocol: bool = True
    ) -> tuple[Socket, bool, int | None]:
        communicator = WebsocketCommunicator(
            URLRouter(websocket_urlpatterns),
            f"/ws/conversations/{conversation_id}/",
            subprotocols=[JSON_SUBPROTOCOL] if json_protocol else [],
        )
        communicator.scope["user"] = user
        # Generous: on a busy machine the handshake (two queries) can take over asgiref's 1 s.
        connected, code = await communicator.connect(timeout=10)
        opened.append(communicator)
        return Socket(communicator), connected, code

    yield _connect
    for communicator in opened:
        with contextlib.suppress(Exception):
            await communicator.disconnect()
    # Close the connection of asgiref's worker thread, where this test's queries ran: left open
    # on PostgreSQL, it keeps the test database from being dropped at the end of the run.
    await database_sync_to_async(connections.close_all)()

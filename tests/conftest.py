from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.layers import channel_layers
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model

from conversations.engines import BACKENDS, get_engine, reset_engines
from conversations.engines.specs import ModelSpec, declared_models
from conversations.generation.replies import finish_sends
from conversations.models import Conversation
from tests.support.chat_models import MODELS
from tests.support.db import close_worker_connections
from tests.support.llama_server import LlamaServer, shared_server, stop_shared_server
from tests.support.replies import generations_finished
from tests.support.sockets import Socket, conversation_communicator, signed_in_session


@pytest.fixture(autouse=True)
def scripted_engine(settings: Any) -> Any:
    """Every test runs on the scripted engine unless it picks another one."""
    settings.CHAT_ENGINE = "scripted"
    # Users are created in most tests; real password hashing would dominate their run time.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.CHAT_SCRIPTED_TOKENS = 40
    settings.CHAT_SCRIPTED_DELAY_MS = 10
    # Tests send frames far faster than a person; the frame limit has tests of its own.
    settings.CHAT_SOCKET_FRAMES_PER_SECOND = 10_000
    settings.CHAT_SOCKET_FRAME_BURST = 10_000
    settings.CHAT_USER_FRAMES_PER_SECOND = 10_000
    settings.CHAT_USER_FRAME_BURST = 10_000
    reset_engines()
    channel_layers.backends.clear()
    yield get_engine("scripted")
    reset_engines()
    channel_layers.backends.clear()


@pytest.fixture(autouse=True)
def fresh_cache(settings: Any) -> None:
    """Every test counts rate limits from zero: its own key prefix, as cache.clear() would
    FLUSHDB a Redis database that the channel layer (and other test runs) share."""
    settings.CACHES = {
        name: {**config, "KEY_PREFIX": f"test-{uuid.uuid4().hex}"}
        for name, config in settings.CACHES.items()
    }


@pytest.fixture(autouse=True)
def sends_finished() -> Iterator[None]:
    """A send still being saved on a send thread when its test ends finishes before the next."""
    yield
    finish_sends()


@pytest.fixture
def stepped_engine(settings: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The engine the test drives token by token (tests/support/stepped.py)."""
    monkeypatch.setitem(BACKENDS, "stepped", "tests.support.stepped")
    settings.CHAT_ENGINE = "stepped"
    reset_engines()
    return get_engine("stepped")


@pytest.fixture(scope="session")
def llama_server() -> Iterator[LlamaServer]:
    """llama.cpp's real OpenAI-compatible server, one for the whole run: every module that
    uses it shares it (a module that stopped it would pull it from under the others, which
    run in a random order), and it stops when the run ends."""
    yield shared_server()
    stop_shared_server()


@pytest.fixture(scope="session")
def tool_calling_llama_server() -> Iterator[LlamaServer]:
    """llama.cpp's real server with its function-calling chat handler: it takes tools, and a
    tool_choice that names one makes the model call it, its arguments held to the tool's
    parameters by a grammar (what a real tool-calling server returns, from a small model)."""
    server = LlamaServer(chat_format="chatml-function-calling")
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


@pytest.fixture
def two_models(settings: Any) -> dict[str, ModelSpec]:
    """CHAT_MODELS declares the test models of tests/support/chat_models.py; by slug."""
    settings.CHAT_MODELS = json.dumps(MODELS)
    return {spec.slug: spec for spec in declared_models()}


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


@pytest.fixture
async def connect() -> AsyncIterator[Callable[..., Any]]:
    """Opens sockets on the consumer in this process; closes them when the test ends."""
    opened: list[WebsocketCommunicator] = []

    async def _connect(
        user: Any, conversation_id: Any, *, json_protocol: bool = True
    ) -> tuple[Socket, bool, int | None]:
        session_key = None
        if user.is_authenticated:
            session_key = await database_sync_to_async(signed_in_session)(user)
        communicator = conversation_communicator(
            user, conversation_id, session_key=session_key, json_protocol=json_protocol
        )
        # Generous: on a busy machine the handshake (two queries) can take over asgiref's 1 s.
        connected, code = await communicator.connect(timeout=10)
        opened.append(communicator)
        return Socket(communicator), connected, code

    yield _connect
    await generations_finished()
    for communicator in opened:
        with contextlib.suppress(Exception):
            await communicator.disconnect()
    await close_worker_connections()

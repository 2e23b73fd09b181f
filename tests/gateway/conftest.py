"""A live daphne serving the gateway, the real openai SDK as its client, and the engine's view.

Each test starts the server it needs (its settings differ: limits, models, recording) through
tests/support/servers.py. The server runs bench/asgi.py's application: chatsite unchanged, plus a
read-only path that hands over what the scripted engine recorded of a request (its prompt,
sampling, tokens and when it was told to stop), so a test can see from the engine's side that a
closed stream stopped it.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from openai import AsyncOpenAI

from conversations.services.tokens import api_token_create
from tests.support import servers as live
from tests.support.servers import ServerProcess

# The engine's records are read through bench/asgi.py's /__bench__/records.
RECORDING_APP = "bench.asgi:application"
BOUND_S = 20.0  # keeps a broken server from hanging the suite; not a speed requirement


@dataclass
class Gateway:
    server: ServerProcess

    @property
    def origin(self) -> str:
        return self.server.origin

    def client(self, api_key: str, **options: Any) -> AsyncOpenAI:
        """The SDK as an application would use it, without its retries (a retried call would
        be a second call)."""
        options = {"max_retries": 0, "timeout": BOUND_S, **options}
        return AsyncOpenAI(base_url=f"{self.origin}/v1", api_key=api_key, **options)

    async def engine_record(self, request_id: str, model: str = "") -> dict[str, Any]:
        """What the scripted engine did for this request (handed over once: read it after the
        reply has settled); `model`: the slug of a CHAT_MODELS model whose engine wrote it."""
        query = {"ids": request_id, **({"model": model} if model else {})}
        async with httpx.AsyncClient(base_url=self.origin, timeout=BOUND_S) as http:
            response = await http.get("/__bench__/records", params=query)
        record: dict[str, Any] = response.json()[request_id]
        return record


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[Callable[..., Gateway]]:
    """Starts a gateway server (daphne, or uvicorn) with the given settings (on top of
    servers.server_env's)."""
    with contextlib.ExitStack() as stack:

        def start(*, server: str = "daphne", **overrides: Any) -> Gateway:
            # Its own rate counters: test runs share the Redis database, and their users' ids.
            overrides.setdefault("CACHE_KEY_PREFIX", f"gateway-test-{uuid.uuid4().hex}")
            (process,) = stack.enter_context(
                live.servers(1, tmp_path, server=server, app=RECORDING_APP, **overrides)
            )
            return Gateway(process)

        yield start


@pytest.fixture
def alice_key(alice: Any) -> str:
    return api_token_create(user=alice, name="gateway tests")[1]


@pytest.fixture
def charlie_key(charlie: Any) -> str:
    return api_token_create(user=charlie, name="charlie's")[1]


def request_id_of(completion_id: str) -> str:
    return completion_id.removeprefix("chatcmpl-")


async def eventually(check: Callable[[], Any], timeout: float = BOUND_S) -> Any:
    """Poll `check` (a coroutine function) until it returns something truthy."""
    async with asyncio.timeout(timeout):
        while not (result := await check()):  # noqa: ASYNC110 - the database has no events
            await asyncio.sleep(0.05)
        return result

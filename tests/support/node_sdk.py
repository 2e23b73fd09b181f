"""The official openai Node SDK as a client of a live gateway: tests/support/openai_node/run.mjs
(the SDK at its lockfile's version) run under node, one call per process.

    async with node_call(base_url, api_key, {"model": "default", ...}) as call:
        headers = await call.headers()  # once the response's headers arrived
        result = await call.result()    # the chunks it read, then its completion, or its error
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.npm import NPM, npm_ci_once

SDK_DIR = Path(__file__).resolve().parent / "openai_node"
NODE = shutil.which("node")
BOUND_S = 30.0  # keeps a stuck call from hanging the suite; not a speed requirement

NEEDS_NODE = pytest.mark.skipif(
    NODE is None or NPM is None, reason="needs node and npm (the openai Node SDK runs on node)"
)


@dataclass
class NodeCall:
    """One run of run.mjs: what it printed so far, read a line at a time."""

    process: asyncio.subprocess.Process
    chunks: list[dict[str, Any]] = field(default_factory=list)
    _headers: dict[str, str] | None = None

    async def _next_event(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        async with asyncio.timeout(BOUND_S):
            line = await self.process.stdout.readline()
        if not line:
            assert self.process.stderr is not None
            problem = (await self.process.stderr.read()).decode()
            raise AssertionError(f"run.mjs ended without a result:\n{problem}")
        event: dict[str, Any] = json.loads(line)
        if event["event"] == "headers":
            self._headers = event["headers"]
        elif event["event"] == "chunk":
            self.chunks.append(event["chunk"])
        return event

    async def headers(self) -> dict[str, str]:
        """The response's headers (lower-case names); raises if the call failed first."""
        while self._headers is None:
            event = await self._next_event()
            if event["event"] == "result":
                raise AssertionError(f"the call ended before its headers: {event}")
        return self._headers

    async def first_chunk(self) -> dict[str, Any]:
        while not self.chunks:
            event = await self._next_event()
            if event["event"] == "result":
                raise AssertionError(f"the call ended before its first chunk: {event}")
        return self.chunks[0]

    async def result(self) -> dict[str, Any]:
        """The last line: {"completion": ...}, {"closed": bool} or {"error": {...}}."""
        while (event := await self._next_event())["event"] != "result":
            pass
        async with asyncio.timeout(BOUND_S):
            await self.process.wait()
        return event


@asynccontextmanager
async def node_call(
    base_url: str, api_key: str, body: dict[str, Any], *, close_after: int | None = None
) -> AsyncIterator[NodeCall]:
    """Runs the call `body` (create()'s argument) through the Node SDK against `base_url`."""
    npm_ci_once(SDK_DIR, "openai")
    task = {"base_url": base_url, "api_key": api_key, "body": body, "close_after": close_after}
    process = await asyncio.create_subprocess_exec(
        str(NODE),
        str(SDK_DIR / "run.mjs"),
        cwd=SDK_DIR,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdin is not None
    process.stdin.write(json.dumps(task).encode())
    process.stdin.close()
    try:
        yield NodeCall(process)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def node_result(base_url: str, api_key: str, body: dict[str, Any], **options: Any) -> Any:
    """The call's whole output: its chunks and its result line."""
    async with node_call(base_url, api_key, body, **options) as call:
        result = await call.result()
        return call.chunks, result

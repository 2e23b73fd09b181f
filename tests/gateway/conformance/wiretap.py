"""What a Python client was sent, byte for byte: an httpx transport that keeps a copy of every
response body as its client reads it, so that the JSON objects the server wrote (not the SDK's
parsed view of them) are what the schema check reads."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx


class _Tee(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, copy: bytearray) -> None:
        self.inner = inner
        self.copy = copy

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for part in self.inner:
            self.copy += part
            yield part

    async def aclose(self) -> None:
        await self.inner.aclose()


class WireTap(httpx.AsyncBaseTransport):
    """An httpx transport: the real one, and each response's body in `bodies`, in order."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.bodies: list[bytearray] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        copy = bytearray()
        self.bodies.append(copy)
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_Tee(response.stream, copy),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=self)

    def last_json(self) -> Any:
        return json.loads(bytes(self.bodies[-1]))

    def last_events(self) -> list[Any]:
        """The last response's server-sent events' data, as JSON; `[DONE]` as the string."""
        return sse_data(bytes(self.bodies[-1]))


def sse_data(body: bytes) -> list[Any]:
    """Each whole event's `data:` (one line each, as chatsite and OpenAI write them), in order;
    the piece of one a client closed the stream in is left out."""
    found: list[Any] = []
    for event in body.decode(errors="replace").split("\n\n")[:-1]:
        for line in event.splitlines():
            if line.startswith("data: "):
                data = line.removeprefix("data: ")
                found.append(data if data == "[DONE]" else json.loads(data))
    return found

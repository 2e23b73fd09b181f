"""The openai engine against real peers: llama.cpp's OpenAI-compatible server, and a small local
server that misbehaves on purpose (refuses, 500, 401, malformed chunk, stalls, hangs up)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

import pytest
from channels.db import database_sync_to_async

from conversations.engines import get_engine, reset_engines
from conversations.engines.base import (
    ChatMessage,
    EngineError,
    FinishReason,
    SamplingParams,
    ToolCall,
)
from conversations.engines.openai import OpenAIEngine
from conversations.models import Message
from tests.support.servers import free_port
from tests.support.sockets import finished, streamed_text

BOUND = 20.0  # keeps a broken engine from hanging the suite; not a speed requirement
CHAT = [ChatMessage("user", "Say hello.")]


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class MisbehavingServer:
    """An HTTP/1.1 server whose first path segment picks how it (mis)behaves."""

    def __init__(self) -> None:
        self.requests: list[Received] = []
        self.client_left = asyncio.Event()
        self.chunks_after_client_left = 0
        self.port = 0
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()

    def url(self, mode: str) -> str:
        return f"http://127.0.0.1:{self.port}/{mode}/v1"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            method, path, _ = (await reader.readline()).decode().split(" ", 2)
            headers = {}
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, value = line.decode().split(":", 1)
                headers[name.strip().lower()] = value.strip()
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            self.requests.append(Received(method, path, headers, body))
            mode = path.split("/")[1]
            if path.endswith("/models"):
                await self._json(writer, 200, {"data": [{"id": "served-model"}]})
            else:
                await getattr(self, f"_{mode}")(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    # -- how each mode answers /chat/completions ------------------------------------------------

    async def _ok(self, reader: Any, writer: asyncio.StreamWriter) -> None:
        await self._start_events(writer)
        await self._event(writer, _chunk(role="assistant"))
        await self._event(writer, _chunk("Hello"))
        await self._event(writer, _chunk(" world"))
        await self._event(writer, _chunk(finish_reason="stop"))
        await self._event(
            writer, {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 2}}
        )
        await self._event(writer, "[DONE]")
        writer.write(b"0\r\n\r\n")

    async def _tools(self, reader: Any, writer: asyncio.StreamWriter) -> None:
        """Two tool calls, as vLLM's server streams them: each call's id and name first, then
        its arguments a few characters a chunk."""
        await self._start_events(writer)
        await self._event(writer, _chunk(role="assistant"))
        for index, (call_id, name, pieces) in enumerate(
            [("call_a", "get_weather", ['{"city"', ': "Paris"}']), ("call_b", "get_time", ["{}"])]
        ):
            start = {"index": index, "id": call_id, "type": "function"}
            await self._event(writer, _tool_chunk({**start, "function": {"name": name}}))
            for piece in pieces:
                await self._event(
                    writer, _tool_chunk({"index": index, "function": {"arguments": piece}})
                )
        await self._event(writer, _chunk(finish_reason="tool_calls"))
        await self._event(writer, "[DONE]")
        writer.write(b"0\r\n\r\n")

    async def _status500(self, reader: Any, writer: asyncio.StreamWriter) -> None:
        await self._json(writer, 500, {"error": {"message": "CUDA out of memory"}})

    async def _status401(self, reader: Any, writer: asyncio.StreamWriter) -> None:
        await self._json(writer, 401, {"error": {"message": "Invalid API key"}})

    async def _malformed(self, reader: Any, writer: asyncio.StreamWriter) -> None:
        await self._start_events(writer)
        await self._event(writer, _chunk("Hello "))
        await self._event(writer, '{"choices": [{"delta": {"content": "wor')
        writer.write(b"0\r\n\r\n")

    async def _stall(self, reader: Any, writer: asyncio.StreamWriter) -> None:
        await self._start_events(writer)
        await self._event(writer, _chunk("Hello "))
        await reader.read()  # say nothing more until the client gives up

    async def _hangup(self, reader: Any, writer: asyncio.StreamWriter) -> None:
        await self._start_events(writer)
        await self._event(writer, _chunk("Hello "))
        writer.transport.abort()  # mid-body, without the closing chunk

    async def _error_event(self, reader: Any, writer: asyncio.StreamWriter) -> None:
        await self._start_events(writer)
        await self._event(writer, _chunk("Hello "))
        await self._event(writer, {"error": {"message": "The engine died", "code": 500}})

    async def _endless(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Writes tokens until the client hangs up, and notes when that happened."""

        async def watch() -> None:
            # EOF, or a reset: a client closing with our data unread makes its kernel send RST.
            with contextlib.suppress(ConnectionError):
                await reader.read()
            self.client_left.set()

        watcher = asyncio.create_task(watch())
        await self._start_events(writer)
        while not self.client_left.is_set():
            await self._event(writer, _chunk("tok "))
            await asyncio.sleep(0.01)
        watcher.cancel()

    # -- HTTP plumbing ----------------------------------------------------------------------------

    async def _json(self, writer: asyncio.StreamWriter, status: int, payload: Any) -> None:
        body = json.dumps(payload).encode()
        writer.write(
            f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            + body
        )
        await writer.drain()

    async def _start_events(self, writer: asyncio.StreamWriter) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        )
        await writer.drain()

    async def _event(self, writer: asyncio.StreamWriter, data: Any) -> None:
        text = data if isinstance(data, str) else json.dumps(data)
        payload = f"data: {text}\n\n".encode()
        writer.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
        await writer.drain()


def _chunk(
    content: str | None = None, *, role: str | None = None, finish_reason: str | None = None
) -> dict[str, Any]:
    delta = {k: v for k, v in (("role", role), ("content", content)) if v is not None}
    return {
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def _tool_chunk(call: dict[str, Any]) -> dict[str, Any]:
    return {
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None}],
    }


@pytest.fixture
async def misbehaving() -> AsyncIterator[MisbehavingServer]:
    server = MisbehavingServer()
    await server.start()
    yield server
    await server.close()


def engine_for(url: str, **overrides: Any) -> OpenAIEngine:
    options: dict[str, Any] = {
        "base_url": url,
        "api_key": "",
        "model": "m",
        "timeout": 5.0,
        "context_tokens": 2048,
    }
    options.update(overrides)
    return OpenAIEngine(**options)


async def read_all(engine: OpenAIEngine) -> tuple[str, Any]:
    stream = engine.stream(CHAT, SamplingParams(max_tokens=20), request_id="r")
    parts: list[str] = []
    async with asyncio.timeout(BOUND), aclosing(aiter(stream)) as deltas:
        async for delta in deltas:
            parts.append(delta)
    return "".join(parts), stream


# -- the protocol ---------------------------------------------------------------------------------


async def test_it_streams_a_chat_completion(misbehaving: MisbehavingServer) -> None:
    engine = engine_for(misbehaving.url("ok"), api_key="sk-test", model="my-model")
    text, stream = await read_all(engine)

    assert text == "Hello world"
    assert stream.result.finish_reason is FinishReason.STOP
    assert (stream.result.prompt_tokens, stream.result.completion_tokens) == (7, 2)
    request = misbehaving.requests[-1]
    assert (request.method, request.path) == ("POST", "/ok/v1/chat/completions")
    assert request.headers["authorization"] == "Bearer sk-test"
    body = json.loads(request.body)
    assert body["model"] == "my-model" and body["stream"] is True
    assert body["messages"] == [{"role": "user", "content": "Say hello."}]
    assert body["max_tokens"] == 20


async def test_it_passes_tools_on_and_reads_the_calls_back(misbehaving: MisbehavingServer) -> None:
    weather = {"type": "function", "function": {"name": "get_weather", "parameters": {}}}
    asked = ToolCall("call_0", "get_weather", '{"city": "Rome"}')
    messages = [
        ChatMessage("user", "Weather in Rome, then Paris?"),
        ChatMessage("assistant", "", tool_calls=(asked,)),
        ChatMessage("tool", "Rain", tool_call_id="call_0"),
    ]
    params = SamplingParams(max_tokens=20, tools=(weather,), tool_choice="auto")
    stream = engine_for(misbehaving.url("tools")).stream(messages, params, request_id="r")
    async with asyncio.timeout(BOUND), aclosing(aiter(stream)) as deltas:
        text = "".join([delta async for delta in deltas])

    assert text == ""
    assert stream.result.finish_reason is FinishReason.TOOL_CALLS
    assert stream.result.tool_calls == [
        ToolCall("call_a", "get_weather", '{"city": "Paris"}'),
        ToolCall("call_b", "get_time", "{}"),
    ]
    body = json.loads(misbehaving.requests[-1].body)
    assert (body["tools"], body["tool_choice"]) == ([weather], "auto")
    assert body["messages"] == [
        {"role": "user", "content": "Weather in Rome, then Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [asked.openai()]},
        {"role": "tool", "content": "Rain", "tool_call_id": "call_0"},
    ]


async def test_it_sends_no_tools_when_it_is_given_none(misbehaving: MisbehavingServer) -> None:
    await read_all(engine_for(misbehaving.url("ok")))
    body = json.loads(misbehaving.requests[-1].body)
    assert "tools" not in body and "tool_choice" not in body


async def test_it_asks_the_server_for_a_model_when_none_is_set(
    misbehaving: MisbehavingServer,
) -> None:
    engine = engine_for(misbehaving.url("ok"), model="")
    await read_all(engine)
    await read_all(engine)

    paths = [r.path for r in misbehaving.requests]
    assert paths.count("/ok/v1/models") == 1, "asked once, then remembered"
    assert json.loads(misbehaving.requests[-1].body)["model"] == "served-model"
    assert engine.model == "served-model"
    assert "authorization" not in misbehaving.requests[-1].headers


async def test_it_hangs_up_on_stop_and_the_server_sees_it(misbehaving: MisbehavingServer) -> None:
    stream = engine_for(misbehaving.url("endless")).stream(
        CHAT, SamplingParams(max_tokens=10_000), request_id="r"
    )
    deltas = aiter(stream)
    async with asyncio.timeout(BOUND):
        for _ in range(3):
            assert await anext(deltas) == "tok "
        # Nobody reads on: stop() itself must close the connection, not the reader leaving,
        # and a closed connection is the confirmation (no waiting for a reader).
        assert await stream.stop() is not None
        await misbehaving.client_left.wait()  # the server's own view: its client is gone
        with pytest.raises(StopAsyncIteration):
            while True:
                await anext(deltas)  # what was already received, then the end
    assert stream.result.finish_reason is FinishReason.ABORT
    assert stream.result.stopped_at is not None


# -- upstream failures become EngineError with a readable message --------------------------------


async def test_it_explains_a_refused_connection_without_the_server_s_address() -> None:
    port = free_port()
    engine = engine_for(f"http://127.0.0.1:{port}/v1")
    with pytest.raises(EngineError) as raised:
        await read_all(engine)
    assert str(raised.value) == "The model server could not be reached.", "what the user reads"
    assert f"Could not connect to the model server at http://127.0.0.1:{port}" in (
        raised.value.detail
    ), "what operators read"


@pytest.mark.parametrize(
    ("mode", "message", "detail"),
    [
        (
            "status500",
            "The model server answered HTTP 500.",
            r"^The model server answered HTTP 500\. CUDA out of memory$",
        ),
        (
            "status401",
            "The model server refused the request (HTTP 401).",
            r"refused our credentials \(HTTP 401\); check the API key\. Invalid API key",
        ),
        (
            "malformed",
            "The model server sent a reply that could not be read.",
            r"sent a malformed chunk: '\{\"choices\"",
        ),
        (
            "stall",
            "The model server sent nothing for 0.3 seconds.",
            r"^The model server sent nothing for 0\.3 seconds\.$",
        ),
        (
            "hangup",
            "The model server closed the connection in the middle of the reply.",
            r"closed the connection in the middle of the reply",
        ),
        (
            "error_event",
            "The model server reported an error.",
            r"^The model server reported an error: The engine died$",
        ),
    ],
)
async def test_it_explains_an_upstream_failure(
    misbehaving: MisbehavingServer, mode: str, message: str, detail: str
) -> None:
    engine = engine_for(misbehaving.url(mode), timeout=0.3)
    with pytest.raises(EngineError) as raised:
        await read_all(engine)
    assert str(raised.value) == message
    assert re.search(detail, raised.value.detail)
    assert "127.0.0.1" not in str(raised.value)


# -- through the socket: the reply is saved with status error and its partial text -------------


@pytest.fixture
def openai_settings(settings: Any, misbehaving: MisbehavingServer) -> Any:
    settings.CHAT_ENGINE = "openai"
    settings.CHAT_OPENAI_MODEL = "m"
    settings.CHAT_OPENAI_TIMEOUT = 0.3
    reset_engines()
    return settings


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("mode", "partial", "error"),
    [
        ("malformed", "Hello ", "could not be read"),
        ("stall", "Hello ", "sent nothing for 0.3 seconds"),
        ("hangup", "Hello ", "closed the connection"),
        ("status500", "", "HTTP 500"),
        ("refused", "", "could not be reached"),
    ],
)
async def test_it_saves_a_failed_reply_with_its_partial_text(
    connect: Any,
    alice: Any,
    conversation: Any,
    misbehaving: MisbehavingServer,
    openai_settings: Any,
    mode: str,
    partial: str,
    error: str,
) -> None:
    openai_settings.CHAT_OPENAI_BASE_URL = (
        f"http://127.0.0.1:{free_port()}/v1" if mode == "refused" else misbehaving.url(mode)
    )
    reset_engines()
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="Say hello.")
    events = await socket.receive_until(finished, timeout=BOUND)

    final = events[-1]["message"]
    # The list layer may drop a frame under load; the finished event's text is what the tab keeps.
    assert partial.startswith(streamed_text(events))
    assert final["content"] == partial
    assert final["status"] == "error"
    assert error in final["error"]
    row = await database_sync_to_async(conversation.messages.get)(role=Message.Role.ASSISTANT)
    assert row.status == Message.Status.ERROR
    assert row.content == partial
    assert error in row.error
    # The user is told what happened; where (the server's address) is for operators only.
    assert "127.0.0.1" not in final["error"] and "127.0.0.1" not in row.error
    assert row.error_detail and "error_detail" not in final
    if mode == "refused":
        assert openai_settings.CHAT_OPENAI_BASE_URL in row.error_detail


@pytest.mark.django_db(transaction=True)
async def test_it_refuses_charlie_before_any_request_reaches_the_server(
    connect: Any,
    charlie: Any,
    conversation: Any,
    misbehaving: MisbehavingServer,
    openai_settings: Any,
) -> None:
    openai_settings.CHAT_OPENAI_BASE_URL = misbehaving.url("ok")
    reset_engines()
    socket, _, _ = await connect(charlie, conversation.pk)
    assert await socket.communicator.receive_output(timeout=2) == {
        "type": "websocket.close",
        "code": 4403,
    }
    assert misbehaving.requests == []


# -- llama.cpp's real server -------------------------------------------------------------------


@pytest.fixture
def on_llama_server(settings: Any, llama_server: Any) -> Any:
    settings.CHAT_ENGINE = "openai"
    settings.CHAT_OPENAI_BASE_URL = llama_server.base_url
    settings.CHAT_OPENAI_MODEL = ""  # whatever the server lists: its GGUF
    settings.CHAT_OPENAI_TIMEOUT = 30
    settings.CHAT_TEMPERATURE = 0.0
    reset_engines()
    return llama_server


@pytest.mark.model
@pytest.mark.django_db(transaction=True)
async def test_it_streams_a_reply_from_llama_cpp_server(
    connect: Any, alice: Any, conversation: Any, on_llama_server: Any, settings: Any
) -> None:
    settings.CHAT_MAX_TOKENS = 24
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="Say hello in three words.")
    events = await socket.receive_until(finished, timeout=60)

    text = streamed_text(events)
    assert text.strip()
    row = await database_sync_to_async(conversation.messages.get)(role=Message.Role.ASSISTANT)
    assert row.status == Message.Status.COMPLETE
    assert row.content == text
    assert row.engine == "openai"
    assert row.finish_reason in ("stop", "length")
    assert get_engine().model.endswith(".gguf"), "the model the server lists"


@pytest.mark.model
@pytest.mark.django_db(transaction=True)
async def test_stop_reaches_llama_cpp_server(
    connect: Any, alice: Any, conversation: Any, on_llama_server: Any, settings: Any
) -> None:
    settings.CHAT_MAX_TOKENS = 1500
    disconnects_before = on_llama_server.disconnects()
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="Write a very long story about a dragon.")
    await socket.receive_until(lambda e: e["type"] == "message.delta", timeout=60)
    await socket.send(action="cancel")
    events = await socket.receive_until(finished, timeout=BOUND)

    assert events[-1]["message"]["status"] == "cancelled"
    row = await database_sync_to_async(conversation.messages.get)(role=Message.Role.ASSISTANT)
    assert row.status == Message.Status.CANCELLED
    assert row.finish_reason == "abort"
    # The server's side: it logged that its client left in the middle of the stream...
    async with asyncio.timeout(BOUND):
        while on_llama_server.disconnects() == disconnects_before:  # noqa: ASYNC110 (a log file)
            await asyncio.sleep(0.05)
    # ...and it is free: a 1500-token story would hold its one model for a long while, yet the
    # next request is answered, in full.
    settings.CHAT_MAX_TOKENS = 8
    await socket.send(action="send", content="Say hi.")
    events = await socket.receive_until(finished, timeout=BOUND)
    assert events[-1]["message"]["status"] == "complete"
    assert events[-1]["message"]["content"].strip()


@pytest.mark.model
async def test_it_reuses_its_connection_to_llama_cpp_server(llama_server: Any) -> None:
    engine = engine_for(llama_server.base_url, timeout=30)
    for _ in range(2):
        text, stream = await read_all(engine)
        assert text.strip() and stream.result.finish_reason in (
            FinishReason.STOP,
            FinishReason.LENGTH,
        )

    # uvicorn logs each request with the client's address: one port, one pooled connection.
    posts = [
        line for line in llama_server.log().splitlines() if "POST /v1/chat/completions" in line
    ]
    ports = {line.split(" - ")[0].rsplit(":", 1)[-1] for line in posts[-2:]}
    assert len(posts) >= 2 and len(ports) == 1, posts[-2:]

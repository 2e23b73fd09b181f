"""chatsite's ASGI application, unchanged, plus a read-only path and a reference relay for the bench.

GET /__bench__/records?ids=a,b hands over (and forgets) what the scripted engine recorded for
those request ids: the wall-clock time of every token it emitted and when it was told to stop.
That is the engine's own view, so the bench can measure from the moment a token left the engine
rather than from a timestamp the web layer took. Nothing on the streaming path changes; the bench
only asks after a measurement. The scripted engine's time.time() and the clients' share one
clock because everything runs on one machine.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
import uuid
from datetime import datetime
from typing import Any
from urllib.parse import parse_qs

from chatsite.asgi import application as chatsite_application
from conversations.engines import get_engine
from conversations.engines.base import ChatMessage, SamplingParams
from conversations.engines.specs import ModelSpec, declared_models

RECORDS_PATH = "/__bench__/records"
RELAY_PATH = "/__bench__/relay/"


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "websocket" and scope["path"] == RELAY_PATH:
        await relay(scope, receive, send)
        return
    if scope["type"] != "http" or scope["path"] != RECORDS_PATH:
        await chatsite_application(scope, receive, send)
        return
    query = parse_qs(scope.get("query_string", b"").decode())
    wanted = [i for i in ",".join(query.get("ids", [])).split(",") if i]
    # ?model=<slug>: a model of CHAT_MODELS rather than the single-engine settings' one.
    slug = query.get("model", [""])[0]
    engine = get_engine(_declared(slug) if slug else "scripted")
    records = getattr(engine, "records", {})
    found = {}
    for request_id in wanted:
        record = records.pop(request_id, None)
        if record is not None:
            found[request_id] = {
                "requested_at": record.requested_at,
                "emit_times": record.emit_times,
                "stop_requested_at": record.stop_requested_at,
                "emitted_after_stop": record.emitted_after_stop,
                "emitted": record.emitted,
                "finished": record.finished,
                # What the engine was asked (the gateway's tests check what reached it).
                "messages": [[message.role, message.content] for message in record.messages],
                # Tool calls and results as the engine was given them (OpenAI's shape).
                "tool_turns": [
                    message.openai_message()
                    for message in record.messages
                    if message.tool_calls or message.role == "tool"
                ],
                "params": dataclasses.asdict(record.params),
            }
    body = json.dumps(found).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _declared(slug: str) -> ModelSpec:
    return next(spec for spec in declared_models() if spec.slug == slug)


async def relay(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The thinnest WebSocket relay of the same engine stream: the floor chatsite is compared with.

    Plain ASGI on the same daphne process: no login, database, channel layer or coalescing; each
    token is sent as it comes, in the frames chatsite's JSON clients read, so the bench's clients
    measure both the same way. A Stop stops the engine and is confirmed by it, as in chatsite.
    """
    engine = get_engine("scripted")
    running: asyncio.Task[None] | None = None
    stream: Any = None
    stop_asked_at = 0.0

    async def reply(request_id: str) -> None:
        nonlocal stream
        stream = engine.stream(
            [ChatMessage("user", "Stream please")], SamplingParams(10**9), request_id=request_id
        )
        message = {"id": 0, "request_id": request_id, "status": "streaming"}
        await _send_json(send, {"type": "message.started", "message": message})
        offset = 0
        async for text in stream:
            await _send_json(
                send, {"type": "message.delta", "message_id": 0, "offset": offset, "text": text}
            )
            offset += len(text)
        confirmed = await stream.stop() if stream.stop_requested else None
        status = "cancelled" if confirmed is not None else "complete"
        latency = (confirmed.timestamp() - stop_asked_at) * 1000 if confirmed else None
        message = {
            **message,
            "status": status,
            "cancel_confirmed_at": _iso(confirmed),
            "cancel_latency_ms": latency,
        }
        await _send_json(send, {"type": "message.finished", "message": message})

    while True:
        event = await receive()
        if event["type"] == "websocket.connect":
            await send({"type": "websocket.accept", "subprotocol": "chatsite.v1.json"})
        elif event["type"] == "websocket.disconnect":
            if running is not None:
                running.cancel()
            return
        elif json.loads(event.get("text") or "{}").get("action") == "cancel":
            if stream is not None and running is not None and not running.done():
                stop_asked_at = time.time()
                await stream.stop()  # returns once the engine confirms; the reply task ends
        elif running is None or running.done():
            running = asyncio.ensure_future(reply(uuid.uuid4().hex))


async def _send_json(send: Any, data: dict[str, Any]) -> None:
    await send({"type": "websocket.send", "text": json.dumps(data)})


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None

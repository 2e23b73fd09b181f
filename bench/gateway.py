"""The OpenAI-compatible gateway's cost: TTFT overhead and cancel latency through
/v1/chat/completions, beside the chat socket's on the same server and engine.

Every sample is one streamed call (stream: true) on a connection of its own, from this process:
it notes when the first chunk with text arrives, waits one to three tokens, and closes the
stream, which the gateway must turn into a Stop. Then it reads the reply's row through the REST
API until it is settled, and the scripted engine's own record (bench/asgi.py), so:

- TTFT overhead = the first text chunk's arrival - the engine's emission of the first token;
- cancel latency = the engine's confirmation that it stopped (the row's cancel_confirmed_at,
  the engine's own stopped_at) - the moment the client closed the stream;
- tokens after close = tokens the engine emitted after the close.

The same number of socket samples (bench.latency's, same process, idle) are taken just before on
the same server, so the gateway's overhead over the socket is read from one run.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import httpx

from bench.clients import Worker
from bench.config import SAMPLER_CONVERSATIONS, Config
from bench.latency import summarize, take_samples
from bench.server import Servers
from bench.stats import summary

CLIENT_DISCONNECT = "client_disconnect"
LIMIT_S = 10.0


def measure(cfg: Config, servers: Servers, cookie: str) -> dict[str, Any]:
    port = servers.ports[0]
    sampler = Worker()
    try:
        # The socket's figures on the same server, the three conversations no latency run uses.
        spare = servers.conversation_ids[SAMPLER_CONVERSATIONS - 3 : SAMPLER_CONVERSATIONS]
        raw = take_samples(cfg, servers, sampler, cookie, (port, port), 0, 2, 0, 0.0, spare)
        raw = take_samples(
            cfg, servers, sampler, cookie, (port, port), 0, cfg.samples, 77, 0.0, spare
        )
        socket = summarize(raw)
    finally:
        sampler.close()
    asyncio.run(_calls(cfg, servers, port, count=2, seed=0))  # warm-up: imports, connections
    calls = asyncio.run(_calls(cfg, servers, port, count=cfg.samples, seed=78))
    records = servers.records([c["request_id"] for c in calls if "request_id" in c])
    gateway = _summarize(calls, records)
    ours, theirs = gateway["ttft_overhead_ms"].get("p50"), socket["ttft_overhead_ms"].get("p50")
    return {
        "setup": servers.setup.describe(),
        "gateway": gateway,
        "socket": {key: socket[key] for key in ("ttft_overhead_ms", "cancel_latency_ms")},
        "ttft_overhead_over_socket_p50_ms": (
            round(ours - theirs, 2) if ours is not None and theirs is not None else None
        ),
    }


async def _calls(cfg: Config, servers: Servers, port: int, count: int, seed: int) -> list[Any]:
    rng = random.Random(seed)
    origin = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Bearer {servers.api_key}"}
    samples: list[dict[str, Any]] = []
    async with httpx.AsyncClient(base_url=origin, headers=headers, timeout=LIMIT_S) as http:
        for _ in range(count):
            try:
                samples.append(await _one_call(http, cfg.pace_ms, rng))
            except (httpx.HTTPError, TimeoutError, KeyError, ValueError) as exc:
                samples.append({"failed": f"{exc.__class__.__name__}: {exc}"[:200]})
    return samples


async def _one_call(http: httpx.AsyncClient, pace_ms: float, rng: random.Random) -> dict[str, Any]:
    body = {"model": "default", "messages": [{"role": "user", "content": "Count for me"}]}
    sent_at = time.time()
    async with http.stream("POST", "/v1/chat/completions", json={**body, "stream": True}) as reply:
        reply.raise_for_status()
        conversation = reply.headers["x-chatsite-conversation"]
        # One reader for the whole stream: an abandoned one closes the connection when it is
        # collected, which would stop the reply before the moment chosen below.
        lines = reply.aiter_lines()
        first_at, request_id = await first_text(lines)
        # A random moment between tokens, one to three tokens in, as the socket's samples do.
        await asyncio.sleep(rng.uniform(pace_ms, 3 * pace_ms) / 1000)
        closed_at = time.time()
    message = await _settled(http, conversation)
    return {
        "request_id": request_id,
        "sent_at": sent_at,
        "first_text_at": first_at,
        "closed_at": closed_at,
        "message": message,
    }


async def first_text(lines: AsyncIterator[str]) -> tuple[float, str]:
    async with asyncio.timeout(LIMIT_S):
        async for line in lines:
            if not line.startswith("data: {"):
                continue
            chunk = json.loads(line.removeprefix("data: "))
            if chunk["choices"] and chunk["choices"][0]["delta"].get("content"):
                return time.time(), str(chunk["id"]).removeprefix("chatcmpl-")
    raise ValueError("the stream ended before any text")


async def _settled(http: httpx.AsyncClient, conversation: str) -> dict[str, Any]:
    async with asyncio.timeout(LIMIT_S):
        while True:
            detail = (await http.get(f"/api/conversations/{conversation}/")).json()
            reply: dict[str, Any] = detail["messages"][-1]
            if reply["status"] not in ("pending", "streaming"):
                return reply
            await asyncio.sleep(0.02)


def _summarize(calls: list[dict[str, Any]], records: dict[str, Any]) -> dict[str, Any]:
    ttft, client_ttft, cancel, server_cancel, after = [], [], [], [], []
    not_cancelled = missing = 0
    failed = [c["failed"] for c in calls if "failed" in c]
    for call in calls:
        if "failed" in call:
            continue
        record, message = records.get(call["request_id"]), call["message"]
        if record is None or not record["emit_times"]:
            missing += 1
            continue
        ttft.append((call["first_text_at"] - record["emit_times"][0]) * 1000)
        client_ttft.append((call["first_text_at"] - call["sent_at"]) * 1000)
        confirmed = message.get("cancel_confirmed_at")
        if message["status"] != "cancelled" or message["cancelled_by"] != CLIENT_DISCONNECT:
            not_cancelled += 1
            continue
        confirmed_at = datetime.fromisoformat(confirmed.replace("Z", "+00:00")).timestamp()
        cancel.append((confirmed_at - call["closed_at"]) * 1000)
        server_cancel.append(message["cancel_latency_ms"])
        after.append(sum(1 for t in record["emit_times"] if t > call["closed_at"]))
    return {
        "ttft_overhead_ms": summary(ttft),
        "client_ttft_ms": summary(client_ttft),
        "cancel_latency_ms": summary(cancel),
        "server_cancel_latency_ms": summary(server_cancel),
        "tokens_after_close": summary(after, digits=1),
        "samples_not_cancelled": not_cancelled,
        "samples_without_engine_record": missing,
        "samples_failed": len(failed),
        "failures": sorted(set(failed))[:5],
    }

"""Many users pressing Send at once: how long until the engine hears of each request.

Each of `burst_sends` users, on a socket to a conversation of their own, sends one message at
the same moment. For each, the scripted engine's record says when its request reached the engine, and the
client notes when its first token arrived; both are measured from the client's send.

Then one API token makes as many streamed /v1/chat/completions calls at once (an API client's
crowd: one owner, whose row each send locks while its limits are counted), on connections
opened before, half to each server; each call is closed at its first text, which stops it.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx

from bench import profile
from bench.clients import Worker, call_all
from bench.config import Config
from bench.gateway import LIMIT_S, first_text
from bench.server import Servers
from bench.stats import summary


def measure(cfg: Config, servers: Servers, workdir: Path) -> dict[str, Any]:
    n = cfg.burst_sends
    ports = servers.ports
    crowd = servers.many_users("sender", n)  # users, not one user's tabs: sends of one user queue
    targets = [(ports[i % len(ports)], conversation) for i, (_, conversation) in enumerate(crowd)]
    cookies = [session for session, _ in crowd]
    workers = [Worker() for _ in range(cfg.client_procs)]
    try:
        shares = [
            {"targets": targets[i :: len(workers)], "cookies": cookies[i :: len(workers)]}
            for i in range(len(workers))
        ]
        opened = call_all(workers, "open", shares)
        servers.wait_idle()
        start_at = time.time() + 0.5
        raw_profile = workdir / f"profile-{servers.setup.name}-sends.txt"
        profiler = profile.start(servers.procs[0].pid, 2, raw_profile) if cfg.profile else None
        parts = call_all(
            workers, "send_together", [{"start_at": start_at, "timeout": 60}] * len(workers)
        )
        call_all(workers, "cancel_all", [{"timeout": 20}] * len(workers))
        call_all(workers, "close_all", [{}] * len(workers))
    finally:
        for worker in workers:
            worker.close()
    servers.wait_idle()
    where = None
    if profiler is not None:
        profiler.wait(timeout=60)
        where = profile.summarize(raw_profile) if raw_profile.exists() else None
    sent = [reply for part in parts for reply in part]
    answered = [s for s in sent if s.get("request_id")]
    records = servers.records([s["request_id"] for s in answered])
    to_engine = [
        (records[s["request_id"]]["requested_at"] - s["sent_at"]) * 1000
        for s in answered
        if records.get(s["request_id"], {}).get("requested_at")
    ]
    to_token = [
        (s["first_delta_at"] - s["sent_at"]) * 1000 for s in answered if s.get("first_delta_at")
    ]
    calls = asyncio.run(_one_token_crowd(servers, n))
    records = servers.records([c["request_id"] for c in calls if "request_id" in c])
    calls_to_engine = [
        (records[c["request_id"]]["requested_at"] - c["sent_at"]) * 1000
        for c in calls
        if records.get(c.get("request_id", ""), {}).get("requested_at")
    ]
    return {
        "setup": servers.setup.describe(),
        "one_token_calls": {
            "calls": n,
            "started": len(calls_to_engine),
            "call_to_engine_ms": summary(calls_to_engine),
            "errors": sorted({c["failed"] for c in calls if "failed" in c}),
        },
        "sends": n,
        "sockets_opened": sum(o["opened"] for o in opened),
        "started": len(answered),
        "send_to_engine_ms": summary(to_engine),
        "send_to_first_token_ms": summary(to_token),
        "errors": sorted({e for s in sent for e in s.get("errors", [])}),
        "profile_of_first_server": where,
    }


async def _one_token_crowd(servers: Servers, n: int) -> list[dict[str, Any]]:
    """`n` streamed gateway calls by the bench user's token, let go at one moment."""
    go = asyncio.Event()
    headers = {"Authorization": f"Bearer {servers.api_key}"}
    body = {
        "model": "default",
        "messages": [{"role": "user", "content": "Count for me"}],
        "stream": True,
    }

    async def call(port: int) -> dict[str, Any]:
        origin = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(base_url=origin, headers=headers, timeout=LIMIT_S) as http:
            await http.get("/healthz")  # the connection is open before the moment
            await go.wait()
            sent_at = time.time()
            try:
                async with http.stream("POST", "/v1/chat/completions", json=body) as reply:
                    reply.raise_for_status()
                    _, request_id = await first_text(reply.aiter_lines())
            except (httpx.HTTPError, TimeoutError, KeyError, ValueError) as exc:
                return {"failed": f"{exc.__class__.__name__}: {exc}"[:200]}
            return {"request_id": request_id, "sent_at": sent_at}

    ports = servers.ports
    tasks = [asyncio.create_task(call(ports[i % len(ports)])) for i in range(n)]
    await asyncio.sleep(1.0)  # every client connected
    go.set()
    return await asyncio.gather(*tasks)

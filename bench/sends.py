"""Many users pressing Send at once: how long until the engine hears of each request.

Each of `burst_sends` users, on a socket to a conversation of their own, sends one message at
the same moment. For each, the scripted engine's record says when its request reached the engine, and the
client notes when its first token arrived; both are measured from the client's send.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bench import profile
from bench.clients import Worker, call_all
from bench.config import Config
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
    return {
        "setup": servers.setup.describe(),
        "sends": n,
        "sockets_opened": sum(o["opened"] for o in opened),
        "started": len(answered),
        "send_to_engine_ms": summary(to_engine),
        "send_to_first_token_ms": summary(to_token),
        "errors": sorted({e for s in sent for e in s.get("errors", [])}),
        "profile_of_first_server": where,
    }

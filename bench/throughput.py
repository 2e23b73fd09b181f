"""Delivery rate, concurrency and memory per idle socket."""

from __future__ import annotations

import asyncio
import time
from array import array
from pathlib import Path
from typing import Any

from bench import profile
from bench.clients import RELAY, Worker, call_all
from bench.config import SAMPLER_CONVERSATIONS, Config
from bench.server import PeakRss, Servers
from bench.stats import summary
from conversations.engines.base import ChatMessage, SamplingParams
from conversations.engines.scripted import ScriptedEngine


def delivery(
    cfg: Config, servers: Servers, cookie: str, tokens: int, delay_ms: float
) -> dict[str, Any]:
    """Tokens/s a client receives, against the same engine iterated alone in this process.

    Both rates are tokens / (the consumer holding the last token - the engine emitting the
    first): the client's receipt of the last delta frame through chatsite, the end of the
    loop alone.
    """
    worker = Worker()
    rates, frames = [], []
    try:
        for run in range(cfg.delivery_runs + 1):  # run 0 warms the process up and is dropped
            reply = worker.call(
                "one_reply",
                port=servers.ports[0],
                conversation_id=servers.conversation_ids[run],
                cookie=cookie,
                content="As fast as you can",
                limit_s=300,
            )
            record = servers.records([reply["message"]["request_id"]])[
                reply["message"]["request_id"]
            ]
            received = sum(reply["frame_tokens"])
            if run and received == tokens:
                rates.append(received / (reply["frame_times"][-1] - record["emit_times"][0]))
                frames.append(len(reply["frame_times"]))
    finally:
        worker.close()
    alone = asyncio.run(_engine_alone(tokens, delay_ms, cfg.delivery_runs))
    through, by_itself = sum(rates) / max(1, len(rates)), sum(alone) / len(alone)
    return {
        "engine_delay_ms": delay_ms,
        "tokens_per_reply": tokens,
        "runs": len(rates),
        "chatsite_tokens_per_s": round(through, 1),
        "engine_alone_tokens_per_s": round(by_itself, 1),
        "ratio": round(through / by_itself, 3) if by_itself else None,
        "frames_per_reply": round(sum(frames) / max(1, len(frames)), 1),
        "setup": servers.setup.describe(),
    }


async def _engine_alone(tokens: int, delay_ms: float, runs: int) -> list[float]:
    engine = ScriptedEngine(tokens, delay_ms)
    params = SamplingParams(max_tokens=tokens)
    rates = []
    for run in range(runs + 1):
        stream = engine.stream([ChatMessage("user", "x")], params, request_id=f"alone-{run}")
        received, last = 0, 0.0
        async for _ in stream:
            received += 1
            last = time.time()
        if run:
            rates.append(received / (last - stream.record.emit_times[0]))
    return rates


def concurrency(cfg: Config, servers: Servers, cookie: str, workdir: Path) -> dict[str, Any]:
    """N streams at the engine's pace; gaps between frames beyond the pace, CPU and memory."""
    workers = [Worker() for _ in range(cfg.client_procs)]
    points: list[dict[str, Any]] = []
    try:
        for n in cfg.sweep:
            point = _concurrency_point(cfg, servers, cookie, workers, n, workdir)
            # The same streams through the reference relay (bench/asgi.py), on the same processes.
            floor = _concurrency_point(cfg, servers, cookie, workers, n, workdir, reference=True)
            point["reference"] = {key: floor[key] for key in REFERENCE_FIGURES}
            points.append(point)
            p99 = point["gap_excess_ms"].get("p99", float("inf"))
            if p99 > cfg.stop_gap_ms or point["tokens_per_s"] < point["expected_tokens_per_s"] / 2:
                break
    finally:
        for worker in workers:
            worker.close()
    passing = [p["streams"] for p in points if p["gap_excess_ms"].get("p99", 1e9) <= 100]
    return {
        "setup": servers.setup.describe(),
        "pace_ms": cfg.pace_ms,
        "window_s": cfg.window_s,
        "points": points,
        "largest_n_p99_gap_under_100ms": max(passing) if passing else None,
        "smallest_n_tested": cfg.sweep[0],
    }


# What a concurrency point keeps of the reference relay's run at the same N.
REFERENCE_FIGURES = ("tokens_per_s", "gap_excess_ms", "server_cpu_s_per_1000_tokens")


def _concurrency_point(
    cfg: Config,
    servers: Servers,
    cookie: str,
    workers: list[Worker],
    n: int,
    workdir: Path,
    *,
    reference: bool = False,
) -> dict[str, Any]:
    ports = servers.ports
    conversations = servers.conversation_ids[SAMPLER_CONVERSATIONS : SAMPLER_CONVERSATIONS + n]
    if reference:
        conversations = [RELAY] * n
    targets = [(ports[i % len(ports)], c) for i, c in enumerate(conversations)]
    shares = [targets[i :: len(workers)] for i in range(len(workers))]
    opened = call_all(workers, "open", [{"targets": s, "cookie": cookie} for s in shares])
    servers.wait_idle()
    stagger = max(1.0, n / 500)  # a crowd of sends arrives over a second or more, not at once
    start_at = time.time() + 0.5
    window_start = start_at + stagger + cfg.warmup_s
    window_end = window_start + cfg.window_s
    clients = [w.proc.pid for w in workers if w.proc.pid is not None]
    with PeakRss(servers) as peak:
        call_all(workers, "stream", [{"start_at": start_at, "stagger_s": stagger}] * len(workers))
        for worker in workers:
            worker.send(
                "collect", window_start=window_start, window_end=window_end, pace_ms=cfg.pace_ms
            )
        time.sleep(max(0.0, window_start - time.time()))
        cpu_start, client_cpu_start = servers.cpu_seconds(), _cpu(clients)
        raw_profile = workdir / f"profile-{servers.setup.name}-{n}.txt"
        profiler = None
        if cfg.profile and not reference:
            profiler = profile.start(servers.procs[0].pid, cfg.window_s, raw_profile)
        time.sleep(max(0.0, window_end - time.time()))
        cpu, client_cpu = servers.cpu_seconds() - cpu_start, _cpu(clients) - client_cpu_start
        collected = [w.result(timeout=cfg.window_s + 120) for w in workers]
    where = None
    if profiler is not None:
        profiler.wait(timeout=cfg.window_s + 60)
        where = profile.summarize(raw_profile) if raw_profile.exists() else None
    stopped = call_all(workers, "cancel_all", [{"timeout": 20}] * len(workers))
    call_all(workers, "close_all", [{}] * len(workers))
    servers.wait_idle()
    excess = array("d")
    for part in collected:
        excess.frombytes(part["excess_ms"])
    tokens = sum(p["tokens"] for p in collected)
    return {
        "streams": n,
        "sockets_opened": sum(o["opened"] for o in opened),
        "streams_delivering_in_window": sum(p["streaming"] for p in collected),
        "tokens_delivered": tokens,
        "tokens_per_s": round(tokens / cfg.window_s, 1),
        "expected_tokens_per_s": round(n * 1000 / cfg.pace_ms, 1),
        "gap_excess_ms": summary(excess),
        "server_cpu_s": round(cpu, 2),
        "server_cpu_s_per_1000_tokens": round(cpu / tokens * 1000, 3) if tokens else None,
        "server_cpu_utilisation": round(cpu / cfg.window_s, 2),
        "client_cpu_utilisation": round(client_cpu / cfg.window_s, 2),
        "peak_rss_mb": round(peak.peak / 2**20, 1),
        "stopped_at_end": sum(s["cancelled"] for s in stopped),
        "not_stopped_at_end": sum(s["unfinished"] for s in stopped),
        "sockets_closed_by_server": sum(s["closed_by_server"] for s in stopped),
        "client_errors": sum(p["error_count"] for p in collected),
        "client_error_codes": sorted({e for p in collected for e in p["errors"]}),
        "profile_of_first_server": where,
    }


def _cpu(pids: list[int]) -> float:
    import psutil

    return sum(sum(psutil.Process(pid).cpu_times()[:2]) for pid in pids)


def idle_memory(cfg: Config, servers: Servers, cookie: str) -> dict[str, Any]:
    """Growth of the servers' RSS per idle open socket, after a warm-up, before any streaming."""
    workers = [Worker() for _ in range(cfg.client_procs)]
    ports = servers.ports
    try:
        warm = [(ports[i % len(ports)], servers.conversation_ids[i]) for i in range(4)]
        workers[0].call("open", targets=warm, cookie=cookie)
        workers[0].call("close_all")
        servers.wait_idle()
        before = servers.rss()
        conversations = servers.conversation_ids[
            SAMPLER_CONVERSATIONS : SAMPLER_CONVERSATIONS + cfg.idle_sockets
        ]
        targets = [(ports[i % len(ports)], c) for i, c in enumerate(conversations)]
        shares = [targets[i :: len(workers)] for i in range(len(workers))]
        opened = sum(
            o["opened"]
            for o in call_all(workers, "open", [{"targets": s, "cookie": cookie} for s in shares])
        )
        time.sleep(cfg.settle_s)
        servers.wait_idle()
        after = servers.rss()
        call_all(workers, "close_all", [{}] * len(workers))
        servers.wait_idle()
    finally:
        for worker in workers:
            worker.close()
    return {
        "setup": servers.setup.describe(),
        "sockets": opened,
        "rss_before_mb": round(before / 2**20, 1),
        "rss_after_mb": round(after / 2**20, 1),
        "bytes_per_socket": round((after - before) / opened) if opened else None,
    }

"""TTFT overhead and cancel latency, idle and with other streams running.

Every sample is one reply: the client sends, notes when the first delta arrives, cancels one to
three tokens in, and waits for message.finished. Afterwards the scripted engine's own record of
that request (its emission times) is fetched from the server, so:

- TTFT overhead = client receipt of the first delta - the engine's emission of the first token.
- cancel latency = the engine's confirmation that it stopped (cancel_confirmed_at, the engine's
  own stopped_at) - the moment the client sent the cancel frame.
- tokens after cancel = tokens the engine emitted after the client sent the cancel frame.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from bench.clients import RELAY, Worker, call_all
from bench.config import SAMPLER_CONVERSATIONS, Config
from bench.server import Servers
from bench.stats import summary

# The reference relay's condition names (bench/asgi.py): the floor chatsite's figures are divided by.
REFERENCE = "reference relay"


def measure(cfg: Config, servers: Servers, cookie: str) -> dict[str, Any]:
    ports = servers.ports
    paths = {"same process": (ports[0], ports[0])}
    if len(ports) > 1:
        paths["across processes"] = (ports[0], ports[1])
    loads = (0, cfg.load_streams if servers.setup.database_url else cfg.load_streams_sqlite)
    sampler = Worker()
    load_workers = [Worker() for _ in range(cfg.client_procs)]
    results: dict[str, Any] = {}
    pools = iter(range(1, SAMPLER_CONVERSATIONS, 3))  # three conversations per condition
    try:
        # Warm-up: the first replies of a process pay for imports, templates and connections.
        take_samples(cfg, servers, sampler, cookie, (ports[0], ports[-1]), 0, count=2, seed=0)
        # The floor: the same engine through the thinnest relay on the same process.
        relay = [RELAY] * 3
        raw = take_samples(
            cfg, servers, sampler, cookie, (ports[0], ports[0]), 0, cfg.samples, 99, 0.0, relay
        )
        results[f"{servers.setup.name}, {REFERENCE}, idle"] = summarize(raw)
        results[f"{servers.setup.name}, {REFERENCE}, idle"]["setup"] = servers.setup.describe()
        for load in loads:
            started = _start_load(cfg, servers, load_workers, cookie, load) if load else 0
            for path, ports_used in paths.items():
                condition = f"{servers.setup.name}, {path}, " + (
                    f"{load} other streams" if load else "idle"
                )
                seed = len(results) + 1
                raw = take_samples(
                    cfg, servers, sampler, cookie, ports_used, next(pools), cfg.samples, seed
                )
                results[condition] = summarize(raw)
                results[condition]["setup"] = servers.setup.describe()
                if load:
                    results[condition]["load_streams_started"] = started
            if load:
                stopped = call_all(
                    load_workers, "cancel_all", [{"timeout": 20}] * len(load_workers)
                )
                call_all(load_workers, "close_all", [{}] * len(load_workers))
                servers.wait_idle()
                for condition in results:
                    if condition.endswith("other streams"):
                        results[condition]["load_streams_running_at_end"] = sum(
                            s["cancelled"] + s["unfinished"] for s in stopped
                        )
                        results[condition]["load_sockets_closed_by_server"] = sum(
                            s["closed_by_server"] for s in stopped
                        )
    finally:
        sampler.close()
        for worker in load_workers:
            worker.close()
    return results


def _start_load(
    cfg: Config, servers: Servers, workers: list[Worker], cookie: str, count: int
) -> int:
    conversations = servers.conversation_ids[SAMPLER_CONVERSATIONS : SAMPLER_CONVERSATIONS + count]
    ports = servers.ports
    targets = [(ports[i % len(ports)], c) for i, c in enumerate(conversations)]
    shares = [targets[i :: len(workers)] for i in range(len(workers))]
    opened = call_all(workers, "open", [{"targets": s, "cookie": cookie} for s in shares])
    servers.wait_idle()
    start_at, stagger = time.time() + 0.3, cfg.settle_s
    call_all(workers, "stream", [{"start_at": start_at, "stagger_s": stagger}] * len(workers))
    time.sleep(
        stagger + 1.5 * cfg.settle_s
    )  # every load stream has started and settled into its pace
    return sum(o["opened"] for o in opened)


def take_samples(
    cfg: Config,
    servers: Servers,
    sampler: Worker,
    cookie: str,
    ports: tuple[int, int],
    first_conversation: int,
    count: int,
    seed: int,
    pause_s: float = 0.0,
    conversation_ids: list[str] | None = None,
) -> list[dict[str, Any]]:
    if conversation_ids is None:
        conversation_ids = servers.conversation_ids[first_conversation : first_conversation + 3]
    samples: list[dict[str, Any]] = sampler.call(
        "cancel_samples",
        send_port=ports[0],
        cancel_port=ports[1],
        conversation_ids=conversation_ids,
        cookie=cookie,
        count=count,
        pace_ms=cfg.pace_ms,
        seed=seed,
        pause_s=pause_s,
    )
    done = [s for s in samples if "failed" not in s]
    records = servers.records([s["request_id"] for s in done])
    for sample in done:
        sample["record"] = records.get(sample["request_id"])
    return samples


def _timestamp(value: str | None) -> float | None:
    return datetime.fromisoformat(value).timestamp() if value else None


def summarize(samples: list[dict[str, Any]]) -> dict[str, Any]:
    ttft_overhead, client_ttft, cancel, server_cancel, after = [], [], [], [], []
    not_cancelled = missing = 0
    failed = [s["failed"] for s in samples if "failed" in s]
    for sample in samples:
        if "failed" in sample:
            continue
        message, record = sample["message"], sample["record"]
        if record is None or not record["emit_times"]:
            missing += 1
            continue
        first_emit = record["emit_times"][0]
        ttft_overhead.append((sample["first_delta_at"] - first_emit) * 1000)
        client_ttft.append((sample["first_delta_at"] - sample["send_sent_at"]) * 1000)
        confirmed = _timestamp(message.get("cancel_confirmed_at"))
        if message["status"] != "cancelled" or confirmed is None:
            not_cancelled += 1
            continue
        cancel.append((confirmed - sample["cancel_sent_at"]) * 1000)
        server_cancel.append(message["cancel_latency_ms"])
        after.append(sum(1 for t in record["emit_times"] if t > sample["cancel_sent_at"]))
    return {
        "ttft_overhead_ms": summary(ttft_overhead),
        "client_ttft_ms": summary(client_ttft),
        "cancel_latency_ms": summary(cancel),
        "server_cancel_latency_ms": summary(server_cancel),
        "tokens_after_cancel": summary(after, digits=1),
        "samples_not_cancelled": not_cancelled,
        "samples_without_engine_record": missing,
        "samples_failed": len(failed),
        "failures": sorted(set(failed))[:5],
        "raw": {"ttft_overhead_ms": ttft_overhead, "cancel_latency_ms": cancel},
    }

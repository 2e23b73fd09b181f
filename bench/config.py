"""How big each measurement is, per mode."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

SCENARIOS = ("latency", "gateway", "sends", "delivery", "concurrency", "memory", "flood", "model")
# Conversations 0-15 belong to single-reply samplers; streams by the hundred use the rest.
SAMPLER_CONVERSATIONS = 16


@dataclass
class Config:
    mode: str = "quick"
    out: Path = Path("bench/results")
    scenarios: tuple[str, ...] = SCENARIOS
    setups: tuple[str, ...] = ("mem1", "pubsub2")  # the default deployment: pub/sub layer
    database_url: str = "postgres://postgres@127.0.0.1:5432/chatsite_bench"
    redis_url: str = "redis://127.0.0.1:6379/14"
    base_port: int = 8710
    client_procs: int = 2
    pace_ms: float = 50.0  # the scripted engine's delay between tokens: 20 tokens/s
    samples: int = 15  # cancel (and TTFT) samples per condition
    load_streams: int = 200  # other streams running during the "under load" samples
    # mem1 runs on SQLite, whose fsync'd commits (one per stream per flush interval, on the one
    # database thread) saturate between 100 and 200 streams on a 2-core machine.
    load_streams_sqlite: int = 50
    sweep: list[int] = field(default_factory=lambda: [50, 200, 600])
    warmup_s: float = 2.0
    window_s: float = 5.0
    # The sweep ends at the first step whose p99 gap is past this or that delivers under half
    # the tokens it should: larger N only takes longer to say the same.
    stop_gap_ms: float = 100.0
    idle_sockets: int = 500
    burst_sends: int = 100  # sends at the same moment, each in a conversation of its own
    delivery_tokens: int = 5000
    delivery_paced_tokens: int = 500
    delivery_paced_ms: float = 1.0
    delivery_runs: int = 3
    model_tokens: int = 48
    model_runs: int = 2
    settle_s: float = 1.0  # pauses that let a server settle before a reading
    profile: bool = False
    server: str = "daphne"  # the ASGI server chatsite runs under (bench/server.py)
    # Extra environment for every chatsite server, e.g. CHAT_COALESCE_MS=100 to try a setting.
    server_env: dict[str, str] = field(default_factory=dict)


def preset(mode: str) -> Config:
    if mode == "full":
        return Config(
            mode="full",
            setups=("mem1", "pubsub2"),
            client_procs=3,
            samples=60,
            sweep=[100, 250, 500, 750, 1000, 1250],
            warmup_s=3.0,
            window_s=15.0,
            stop_gap_ms=1000.0,
            idle_sockets=2000,
            delivery_tokens=20000,
            delivery_paced_tokens=1000,
            delivery_runs=5,
            model_tokens=128,
            model_runs=4,
        )
    if mode == "tiny":  # the CI smoke: every code path, tiny sizes
        return replace(
            Config(mode="tiny"),
            client_procs=1,
            samples=3,
            load_streams=4,
            load_streams_sqlite=4,
            sweep=[4],
            warmup_s=0.5,
            window_s=1.0,
            idle_sockets=10,
            burst_sends=4,
            delivery_tokens=200,
            delivery_paced_tokens=50,
            delivery_runs=1,
            model_tokens=8,
            model_runs=1,
            settle_s=0.2,
        )
    return Config()

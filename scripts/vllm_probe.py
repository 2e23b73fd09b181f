#!/usr/bin/env python
"""Probe the facts chatsite's vllm engine depends on, against a real vLLM (the CPU build).

    .venv-vllm/bin/python scripts/vllm_probe.py [MODEL_DIR]     # MODEL_DIR: .cache/smollm2-hf

Prints, with the numbers measured:
  c. the AsyncEngineArgs field names this vLLM has (enforce_eager, request logging, stats
     logging, max_model_len, the KV cache size on CPU, dtype);
  a. AsyncLLM.from_engine_args run in a worker thread (asyncio.to_thread, no event loop there)
     and then used from the loop: the longest gap of a 50 ms ticker while the engine builds,
     a DELTA stream, abort() ending it with finish_reason "abort";
  d. get_tokenizer(): plain or a coroutine; apply_chat_template(tokenize=False,
     add_generation_prompt=True) on the model directory;
  e. build time (enforce_eager=True), tokens/s of a 64-token reply, abort() to stream's end;
  b. llm.shutdown(): what it is, how long it takes, the child processes before and after; then,
     in fresh processes, what happens to the children when the parent gets SIGTERM without
     shutdown(), and when it simply returns without shutdown().

vLLM forces the spawn start method on CPU, so the whole script sits behind the __main__ guard
(spawned children re-import this file). Every wait has a timeout and a watchdog kills the
process tree if the probe overruns; leftover children are killed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import inspect
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MODEL = ROOT / ".cache" / "smollm2-hf"
PROMPT = "Write a very long story about a lighthouse keeper and the sea, in many chapters."


def set_env() -> None:
    # Before vllm is imported: nothing from a hub, quiet. The KV cache size is given as the
    # engine arg kv_cache_memory_bytes in the main probe; the child probes use the legacy env
    # VLLM_CPU_KVCACHE_SPACE=2 (GiB) instead, so both routes are exercised.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
    os.environ.setdefault("DO_NOT_TRACK", "1")


def children() -> list[dict[str, Any]]:
    """Our descendants; a zombie (exited, not yet reaped) is listed as such."""
    import psutil

    found: list[dict[str, Any]] = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.status() == psutil.STATUS_ZOMBIE:
                found.append({"pid": child.pid, "name": "<zombie: exited, not reaped>", "cmd": ""})
            else:
                cmd = " ".join(child.cmdline())[:80]
                found.append({"pid": child.pid, "name": child.name(), "cmd": cmd})
        except psutil.Error:
            found.append({"pid": child.pid, "name": "<gone>", "cmd": ""})
    return found


def is_tracker(proc: Any) -> bool:
    try:
        return "resource_tracker" in " ".join(proc.cmdline())
    except Exception:
        return False


def kill_children(label: str, keep_tracker: bool = False) -> None:
    """Kill what is left under us. multiprocessing's resource tracker (spawned once per process,
    it exits when this process does) is kept with keep_tracker."""
    import psutil

    left = [
        p for p in psutil.Process().children(recursive=True) if not (keep_tracker and is_tracker(p))
    ]
    if not left:
        return
    print(f"  [{label}] killing leftover children: {[p.pid for p in left]}", flush=True)
    for proc in left:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(left, timeout=10)


def start_watchdog(seconds: float) -> None:
    def fire() -> None:
        print(f"WATCHDOG: probe ran past {seconds:.0f}s; killing children and exiting", flush=True)
        kill_children("watchdog")
        os._exit(3)

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()


def section(title: str) -> None:
    print(f"\n=== {title}", flush=True)


# --- c. AsyncEngineArgs fields ------------------------------------------------------------


def engine_arg_fields() -> dict[str, Any]:
    import dataclasses

    import vllm.envs as envs
    from vllm import AsyncEngineArgs

    fields = {f.name: f.default for f in dataclasses.fields(AsyncEngineArgs)}
    wanted = [
        "enforce_eager",
        "enable_log_requests",
        "disable_log_requests",
        "disable_log_stats",
        "max_model_len",
        "kv_cache_memory_bytes",
        "swap_space",
        "cpu_offload_gb",
        "gpu_memory_utilization",
        "dtype",
        "tensor_parallel_size",
        "max_num_seqs",
        "device",
    ]
    section("c. AsyncEngineArgs fields (name: default; MISSING = not a field in this version)")
    for name in wanted:
        print(f"  {name:<24} {fields[name]!r}" if name in fields else f"  {name:<24} MISSING")
    kv_env = "VLLM_CPU_KVCACHE_SPACE"
    print(
        f"  env {kv_env}: known to vllm.envs={kv_env in getattr(envs, 'environment_variables', {})}, "
        f"value now={os.environ.get(kv_env)!r} (GiB)"
    )
    return fields


def make_args(model: str, fields: dict[str, Any], kv_arg: bool = True) -> Any:
    from vllm import AsyncEngineArgs

    kwargs: dict[str, Any] = dict(
        model=model,
        enforce_eager=True,
        max_model_len=2048,
        dtype="bfloat16",
        disable_log_stats=True,
    )
    if kv_arg:
        kwargs["kv_cache_memory_bytes"] = 2 * 1024**3
    if "enable_log_requests" in fields:
        kwargs["enable_log_requests"] = False
    elif "disable_log_requests" in fields:
        kwargs["disable_log_requests"] = True
    return AsyncEngineArgs(**kwargs)


# --- a, d, e, b: the in-process probe ------------------------------------------------------


class Ticker:
    """A 50 ms sleeper on the event loop; the longest gap between its ticks shows a blocked loop."""

    def __init__(self) -> None:
        self.max_gap = 0.0
        self.ticks = 0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.05)
            now = time.monotonic()
            self.max_gap = max(self.max_gap, now - last)
            self.ticks += 1
            last = now

    def start(self) -> None:
        self.max_gap, self.ticks = 0.0, 0
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> tuple[float, int]:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        return self.max_gap, self.ticks


async def probe(args: argparse.Namespace) -> None:
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind
    from vllm.v1.engine.async_llm import AsyncLLM

    fields = engine_arg_fields()
    engine_args = make_args(str(args.model), fields)

    section("a. AsyncLLM.from_engine_args in a worker thread (asyncio.to_thread)")
    print(f"  children before build: {children()}")
    ticker = Ticker()
    ticker.start()
    started = time.monotonic()
    llm = await asyncio.wait_for(
        asyncio.to_thread(AsyncLLM.from_engine_args, engine_args), args.build_timeout
    )
    build_s = time.monotonic() - started
    gap, ticks = await ticker.stop()
    print(
        f"  built in {build_s:.1f}s (enforce_eager=True); type {type(llm).__module__}.{type(llm).__name__}"
    )
    print(f"  event loop during the build: {ticks} ticks of 50 ms, longest gap {gap * 1000:.0f} ms")
    print(f"  children after build: {children()}")
    try:
        await use_engine(llm, args, SamplingParams, RequestOutputKind)
    finally:
        section("b. shutdown()")
        shutdown = llm.shutdown
        print(
            f"  llm.shutdown is {'a coroutine function' if inspect.iscoroutinefunction(shutdown) else 'plain'}"
            f"; children before: {children()}"
        )
        started = time.monotonic()
        result = shutdown()  # timeout=None: SIGTERM to EngineCore, SIGKILL after 5 s
        if inspect.isawaitable(result):
            await asyncio.wait_for(result, 60)
        took = time.monotonic() - started
        print(
            f"  shutdown() returned {result!r} in {took:.2f}s; children right after: {children()}"
        )
        for _ in range(50):  # up to 10 s
            if not [c for c in children() if "resource_tracker" not in c["cmd"]]:
                break
            await asyncio.sleep(0.2)
        print(f"  children 10s later at most: {children()}")
        # AsyncLLM.__del__ calls shutdown() again; left to interpreter teardown it raises
        # (TypeError: vllm's module globals are already None), so collect it now.
        del llm
        gc.collect()


async def use_engine(
    llm: Any, args: argparse.Namespace, SamplingParams: Any, RequestOutputKind: Any
) -> None:
    section("d. tokenizer")
    got = llm.get_tokenizer()
    print(
        f"  AsyncLLM.get_tokenizer is {'a coroutine function' if inspect.iscoroutinefunction(llm.get_tokenizer) else 'plain'}"
        f"; returned {type(got).__name__}"
    )
    tokenizer = await got if inspect.isawaitable(got) else got
    print(f"  tokenizer class: {type(tokenizer).__module__}.{type(tokenizer).__name__}")
    messages = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": PROMPT},
    ]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    ids = list(tokenizer.encode(text, add_special_tokens=False))
    print(
        f"  apply_chat_template(tokenize=False, add_generation_prompt=True) -> {type(text).__name__}:"
    )
    print("    " + repr(text))
    print(f"  encoded (add_special_tokens=False): {len(ids)} tokens")

    section("e. a 64-token reply (ignore_eos), DELTA")
    ticker = Ticker()
    ticker.start()
    params = SamplingParams(
        max_tokens=64, temperature=0.0, ignore_eos=True, output_kind=RequestOutputKind.DELTA
    )
    started = time.monotonic()
    first = None
    tokens = deltas = 0
    finish = None
    pieces: list[str] = []

    async def run_reply() -> None:
        nonlocal first, tokens, deltas, finish
        async for out in llm.generate({"prompt_token_ids": ids}, params, "probe-64"):
            completion = out.outputs[0]
            if first is None and completion.token_ids:
                first = time.monotonic()
            tokens += len(completion.token_ids)
            deltas += 1
            pieces.append(completion.text)
            finish = completion.finish_reason or finish

    await asyncio.wait_for(run_reply(), args.step_timeout)
    ended = time.monotonic()
    gap, _ = await ticker.stop()
    assert first is not None
    decode = (tokens - 1) / (ended - first) if tokens > 1 else float("nan")
    print(
        f"  {tokens} tokens in {deltas} deltas, finish_reason={finish!r}; first token after "
        f"{(first - started) * 1000:.0f} ms; {tokens / (ended - started):.1f} tok/s overall, "
        f"{decode:.1f} tok/s after the first; longest loop gap {gap * 1000:.0f} ms"
    )
    print(f"  text: {''.join(pieces)[:160]!r}")

    section("a. streaming from the loop, then abort(request_id)")
    params = SamplingParams(
        max_tokens=1500, temperature=0.0, ignore_eos=True, output_kind=RequestOutputKind.DELTA
    )
    request_id = "probe-abort"
    seen: list[tuple[int, str | None]] = []
    aborted_at: float | None = None
    ended_at: float | None = None
    abort_result: Any = None

    async def stream_and_abort() -> None:
        nonlocal aborted_at, ended_at, abort_result
        async for out in llm.generate({"prompt_token_ids": ids}, params, request_id):
            completion = out.outputs[0]
            seen.append((len(completion.token_ids), completion.finish_reason))
            if len(seen) == 5 and aborted_at is None:
                aborted_at = time.monotonic()
                abort_result = await llm.abort(request_id)
        ended_at = time.monotonic()

    await asyncio.wait_for(stream_and_abort(), args.step_timeout)
    assert aborted_at is not None and ended_at is not None
    print(
        f"  abort is {'a coroutine function' if inspect.iscoroutinefunction(llm.abort) else 'plain'}; returned {abort_result!r}"
    )
    print(f"  deltas (token count, finish_reason): {seen}")
    print(
        f"  stream ended {(ended_at - aborted_at) * 1000:.1f} ms after abort() was called; "
        f"{len(seen) - 5} outputs after the call; last finish_reason={seen[-1][1]!r}; "
        f"tokens {sum(n for n, _ in seen)} of max 1500"
    )
    unfinished = llm.output_processor.get_num_unfinished_requests()
    print(f"  output_processor unfinished requests afterwards: {unfinished}")

    section("a'. abort by closing the generator (the reader goes away)")
    gen = llm.generate({"prompt_token_ids": ids}, params, "probe-close")
    count = 0
    async for _ in gen:
        count += 1
        if count == 3:
            break
    await gen.aclose()
    await asyncio.sleep(0.5)
    print(
        f"  after aclose(): output_processor unfinished = "
        f"{llm.output_processor.get_num_unfinished_requests()}"
    )

    section("a''. abort() of an id vLLM never saw")
    started = time.monotonic()
    result = await asyncio.wait_for(llm.abort("never-sent"), 10)
    print(f"  returned {result!r} in {(time.monotonic() - started) * 1000:.1f} ms (no error)")


# --- b. the parent dies without shutdown(): run in a fresh process --------------------------


def child_main(args: argparse.Namespace) -> None:
    """Build the engine, report our children, then wait (sigterm) or return (return)."""
    import dataclasses

    from vllm import AsyncEngineArgs
    from vllm.v1.engine.async_llm import AsyncLLM

    fields = {f.name: f.default for f in dataclasses.fields(AsyncEngineArgs)}

    async def run() -> None:
        llm = AsyncLLM.from_engine_args(make_args(str(args.model), fields, kv_arg=False))
        from vllm import SamplingParams

        async for _ in llm.generate(
            {"prompt_token_ids": [1, 2, 3]}, SamplingParams(max_tokens=4), "c"
        ):
            pass
        print("READY " + json.dumps([c["pid"] for c in children()]), flush=True)
        if args.child == "sigterm":
            await asyncio.sleep(600)
        elif args.child == "sigterm-handled":
            # The remedy: a SIGTERM handler that shuts the engine down before exiting.
            stop = asyncio.Event()
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
            await asyncio.wait_for(stop.wait(), 600)
            started = time.monotonic()
            llm.shutdown()
            print(
                f"CHILD shutdown() after SIGTERM took {time.monotonic() - started:.2f}s", flush=True
            )
        # "return": leave without shutdown(); asyncio.run closes the loop, the process exits.

    asyncio.run(run())
    print("CHILD RETURNING", flush=True)


def parent_dies(args: argparse.Namespace, mode: str) -> None:
    import psutil

    what = {
        "sigterm": "gets SIGTERM (default handler), no shutdown()",
        "sigterm-handled": "gets SIGTERM, its handler calls llm.shutdown()",
        "return": "returns from asyncio.run()/main without calling shutdown()",
    }[mode]
    section(f"b. parent {what}")
    proc = subprocess.Popen(
        [sys.executable, __file__, str(args.model), "--child", mode],
        env={**os.environ, "VLLM_CPU_KVCACHE_SPACE": "2"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    # The engine's processes inherit the child's stdout: a plain read() would wait for them
    # too, so a thread collects the lines and we only ever wait with a timeout.
    lines: list[str] = []
    ready = threading.Event()
    assert proc.stdout is not None
    stdout = proc.stdout

    def collect() -> None:
        for line in stdout:
            lines.append(line.rstrip())
            if line.startswith("READY "):
                ready.set()

    threading.Thread(target=collect, daemon=True).start()
    deadline = time.monotonic() + args.build_timeout + 60
    while not ready.is_set() and proc.poll() is None and time.monotonic() < deadline:
        ready.wait(0.5)
    pids: list[int] = next((json.loads(x[6:]) for x in lines if x.startswith("READY ")), [])
    print(f"  parent pid {proc.pid}; its children: {pids}")
    if not pids:
        print("  child failed or timed out:\n    " + "\n    ".join(lines[-15:]))
        proc.kill()
        return
    started = time.monotonic()
    if mode.startswith("sigterm"):
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        print("  parent did not exit within 60s; killing it")
        proc.kill()
        proc.wait()
    exited = time.monotonic() - started
    time.sleep(0.5)
    ready_at = next(i for i, line in enumerate(lines) if line.startswith("READY "))
    tail = [
        line[:160]
        for line in lines[ready_at + 1 :]
        if "[shutdown]" in line or "CHILD" in line or "Parent" in line
    ]
    print(f"  parent exited with {proc.returncode} after {exited:.1f}s; its lines after READY:")
    for line in tail[-12:]:
        print(f"    {line}")
    alive: list[str] = []
    waited = 0.0
    for wait in (0.0, 2.0, 8.0, 20.0):
        time.sleep(wait)
        waited += wait
        alive = []
        for pid in pids:
            try:
                proc_ = psutil.Process(pid)
                if proc_.status() != psutil.STATUS_ZOMBIE:
                    alive.append(f"{pid} {proc_.name()} (ppid {proc_.ppid()})")
            except psutil.Error:
                pass
        print(f"  +{waited:>4.0f}s after exit: children still alive: {alive}")
    for pid in [int(a.split()[0]) for a in alive]:
        try:
            print(f"  killing orphan {pid} ({psutil.Process(pid).name()})")
            psutil.Process(pid).kill()
        except psutil.Error:
            pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", nargs="?", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--build-timeout", type=float, default=300)
    parser.add_argument("--step-timeout", type=float, default=240)
    parser.add_argument("--skip-orphans", action="store_true", help="skip the two extra builds")
    parser.add_argument(
        "--child", choices=["sigterm", "sigterm-handled", "return"], help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    set_env()
    if not (args.model / "config.json").is_file():
        sys.exit(f"{args.model} holds no model: run scripts/convert_smollm2.py first")
    if args.child:
        start_watchdog(args.build_timeout + 700)
        child_main(args)
        return
    start_watchdog(4 * args.build_timeout + 4 * args.step_timeout)
    import vllm

    print(f"vllm {vllm.__version__}; python {sys.version.split()[0]}; model {args.model}")
    try:
        asyncio.run(probe(args))
    finally:
        kill_children("in-process probe", keep_tracker=True)
    if not args.skip_orphans:
        for mode in ("sigterm", "sigterm-handled", "return"):
            parent_dies(args, mode)
    kill_children("end")
    print("\nprobe done", flush=True)


if __name__ == "__main__":
    main()

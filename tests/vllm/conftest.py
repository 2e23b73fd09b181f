"""The real-vLLM tier: the vllm engine against vLLM itself (the CPU build), not the stand-in.

It runs in .venv-vllm (`make test-vllm`, built by scripts/vllm_venv.sh) on SmolLM2-135M-Instruct
converted by scripts/convert_smollm2.py. Where vllm is not installed (the main suite's .venv)
nothing in this folder is collected, so `make test` neither needs vLLM nor waits for it.
"""

from __future__ import annotations

import importlib.util
import os

if importlib.util.find_spec("vllm") is None:
    collect_ignore_glob = ["*"]
else:
    # Before vllm is imported, here and in the servers the tests start (they inherit this
    # environment): everything comes from the converted model directory, nothing from a hub.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
    os.environ.setdefault("DO_NOT_TRACK", "1")

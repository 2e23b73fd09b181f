"""`make bench`'s gateway row, run for real at a tiny size: only the report's shape is checked; the
figures belong to the bench, not to the suite."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.servers import ROOT, free_port

pytestmark = [pytest.mark.processes, pytest.mark.timeout(170)]


def test_the_bench_measures_the_gateway_beside_the_socket(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "bench", "--mode", "tiny", "--setups", "mem1", "--only", "gateway",
         "--out", str(tmp_path), "--port", str(free_port())],
        cwd=ROOT, capture_output=True, text=True, timeout=160,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-4000:]
    report = json.loads((tmp_path / "tiny" / "report.json").read_text())

    row = report["gateway"]["mem1"]
    calls = row["gateway"]
    assert calls["samples_failed"] == calls["samples_not_cancelled"] == 0
    assert calls["ttft_overhead_ms"]["n"] == calls["cancel_latency_ms"]["n"] == 3
    assert calls["tokens_after_close"]["max"] >= 0
    assert row["socket"]["ttft_overhead_ms"]["n"] == 3
    assert isinstance(row["ttft_overhead_over_socket_p50_ms"], float)
    assert "Gateway (/v1/chat/completions, streamed) on mem1" in run.stdout

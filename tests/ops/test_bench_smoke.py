"""The bench, run for real at a tiny size: it must start chatsite, measure and write its report.

Only the report's shape is checked; the figures belong to `make bench`, not to CI.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.flood import FLOODS
from bench.report import FRAME_FLOOD
from tests.support.servers import ROOT, free_port

pytestmark = [pytest.mark.processes, pytest.mark.timeout(170)]


def assert_percentiles(summary: dict[str, Any], n: int) -> None:
    assert summary["n"] == n
    assert summary["min"] <= summary["p50"] <= summary["p95"] <= summary["p99"] <= summary["max"]


def test_it_writes_a_well_formed_report(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "bench", "--mode", "tiny", "--setups", "mem1",
         "--only", "latency,delivery,concurrency,memory", "--out", str(tmp_path),
         "--port", str(free_port())],
        cwd=ROOT, capture_output=True, text=True, timeout=160,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-4000:]
    folder = tmp_path / "tiny"
    report = json.loads((folder / "report.json").read_text())

    assert set(report["latency"]) == {
        "mem1, reference relay, idle",
        "mem1, same process, idle",
        "mem1, same process, 4 other streams",
    }
    for condition in report["latency"].values():
        assert_percentiles(condition["ttft_overhead_ms"], 3)
        assert_percentiles(condition["cancel_latency_ms"], 3)
        assert condition["samples_not_cancelled"] == 0
        assert condition["tokens_after_cancel"]["max"] >= 0
    assert report["latency"]["mem1, same process, 4 other streams"]["load_streams_started"] == 4

    assert len(report["delivery"]) == 2
    for delivery in report["delivery"].values():
        assert delivery["runs"] == 1
        assert delivery["chatsite_tokens_per_s"] > 0 and delivery["engine_alone_tokens_per_s"] > 0

    (point,) = report["concurrency"]["mem1"]["points"]
    assert point["streams"] == point["sockets_opened"] == 4
    assert point["tokens_delivered"] > 0
    assert point["server_cpu_s_per_1000_tokens"] > 0 and point["peak_rss_mb"] > 0
    assert point["gap_excess_ms"]["n"] > 0

    assert report["memory"]["mem1"]["sockets"] == 10
    assert report["meta"]["duration_s"] > 0
    assert {t["name"].split(" (")[0] for t in report["targets"]} >= {
        "TTFT overhead", "cancel latency", "delivery ratio", "memory per idle socket",
    }  # fmt: skip

    assert "Targets" in run.stdout and "TTFT overhead" in run.stdout
    assert "mem1, same process, idle / reference relay (p50): TTFT overhead" in run.stdout
    assert (folder / "report.txt").read_text().strip() in run.stdout
    for plot in ("latency.png", "concurrency.png"):
        assert (folder / plot).read_bytes().startswith(b"\x89PNG")
    assert "chatsite_tokens_generated_total" in (folder / "metrics-mem1.txt").read_text()


def test_the_flood_scenario_measures_another_user_during_each_flood(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "bench", "--mode", "tiny", "--setups", "mem1",
         "--only", "flood", "--out", str(tmp_path), "--port", str(free_port())],
        cwd=ROOT, capture_output=True, text=True, timeout=160,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-4000:]
    report = json.loads((tmp_path / "tiny" / "report.json").read_text())

    runs = report["flood"]["mem1"]["runs"]
    assert list(runs) == ["quiet", *FLOODS]
    for run_data in runs.values():
        assert_percentiles(run_data["client_ttft_ms"], 3)
    frame_flood = runs[FRAME_FLOOD]["flood"]
    # The server closed every socket it let open (default limits), and refused the rest.
    assert frame_flood["opened"] > 0 and frame_flood["frames_sent"] > 0
    assert frame_flood["closed_by_server"] + frame_flood["refused_at_open"] >= 1
    assert any(t["name"].startswith("client TTFT while another user") for t in report["targets"])

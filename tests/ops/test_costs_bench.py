"""bench/costs.py at its tiny size: it measures each cost it reports (the figures belong to its
runs, not to tests)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.pages.test_browser import server_database
from tests.support.servers import ROOT


def test_the_costs_benchmark_measures_imports_and_an_export_page(tmp_path: Path, db: Any) -> None:
    out = tmp_path / "costs.json"
    with server_database(tmp_path) as database_url:
        run = subprocess.run(
            [sys.executable, "-m", "bench.costs", "--mode", "tiny", "--database-url",
             database_url, "--json", str(out)],
            cwd=ROOT, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(out.read_text())
    assert [row["nodes"] for row in report["import_chain"]] == [1_000, 2_000]
    assert all(row["us_per_node"] > 0 for row in report["import_chain"])
    (memory,) = report["import_memory"]
    assert memory["json_mib"] >= 0.9 and memory["peak_mib"] > 0
    page = report["export_page"]
    assert 0 < page["page_mib"] <= page["page_limit_mib"] and page["peak_mib"] > 0
    assert "Import time per node" in run.stdout and "Memory per export page" in run.stdout

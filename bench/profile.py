"""py-spy during a concurrency step, and a summary of where the server's time went."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any


def start(pid: int, seconds: float, target: Path) -> subprocess.Popen[bytes] | None:
    """Sample one server process (holding the GIL only) for `seconds`; None without py-spy."""
    # Installed next to this interpreter (a virtualenv that is not activated), or on PATH.
    beside = Path(sys.executable).parent / "py-spy"
    spy = str(beside) if beside.exists() else shutil.which("py-spy")
    if spy is None:
        return None
    command = [spy, "record", "--pid", str(pid), "--duration", str(max(1, int(seconds)))]
    command += ["--format", "raw", "--rate", "200", "--gil", "--nonblocking"]
    command += ["--output", str(target)]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def summarize(raw: Path, top: int = 15) -> dict[str, Any]:
    """Share of samples in which each function was on the stack, and at its top.

    py-spy's raw format is one collapsed stack per line followed by its sample count.
    """
    inclusive: Counter[str] = Counter()
    ours: Counter[str] = Counter()  # chatsite's own functions, inclusive
    own: Counter[str] = Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        samples = int(count)
        total += samples
        frames = [_name(frame) for frame in stack.split(";")]
        for name in set(frames):
            inclusive[name] += samples
        for name in {_name(f) for f in stack.split(";") if " (conversations/" in f}:
            ours[name] += samples
        own[frames[-1]] += samples
    if not total:
        return {"samples": 0}

    def share(counter: Counter[str]) -> list[tuple[str, float]]:
        return [(name, round(100 * n / total, 1)) for name, n in counter.most_common(top)]

    return {
        "samples": total,
        "chatsite_inclusive_percent": share(ours),
        "inclusive_percent": share(inclusive),
        "self_percent": share(own),
    }


def _name(frame: str) -> str:
    """'Feed.send_now (conversations/generation/feed.py:44)' -> name and file."""
    function, _, where = frame.partition(" (")
    path = where.rsplit(":", 1)[0]
    return f"{function} ({'/'.join(path.split('/')[-2:])})" if path else function

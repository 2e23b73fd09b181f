"""Reading attached files: how long each kind takes, what the reading child costs, and that the
server's event loop keeps ticking all the while.

    python -m bench.attachments
    python -m bench.attachments --at-once 4 --json bench/results/attachments.json

For each document (a 50-page PDF, a 300-paragraph DOCX, a 1 MB text file, and the hostile ones
the tests refuse: a flate bomb, a 20,000-page tree, a zip bomb in a DOCX), it reads `--at-once`
copies concurrently through extraction.extracted_text, as the upload view does, while a ticker
asks the loop for a turn every 10 ms. It reports the wall time, the longest gap between ticks,
and the children's peak RSS (getrusage of the reaped children: the largest any reader grew).
No database is needed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

TICK_S = 0.01


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--at-once", type=int, default=4, help="files read concurrently")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatsite.settings")
    os.environ.setdefault("DEBUG", "1")
    import django

    django.setup()
    rows = asyncio.run(_measure(args.at_once))
    for row in rows:
        print(
            f"{row['document']:<28} {row['outcome']:<10} {row['wall_s']:6.2f} s   "
            f"longest loop gap {row['longest_gap_ms']:6.1f} ms   reader peak {row['child_peak_mb']:5.0f} MB"
        )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"at_once": args.at_once, "documents": rows}, indent=2))


def _documents() -> list[tuple[str, Callable[[], bytes], Any]]:
    from conversations.attachments.kinds import Kind
    from tests.support import documents

    return [
        (
            "pdf, 50 pages",
            lambda: documents.text_pdf([f"Page {i} " * 40 for i in range(50)]),
            Kind.PDF,
        ),
        (
            "docx, 300 paragraphs",
            lambda: documents.docx([f"Paragraph {i} " * 20 for i in range(300)]),
            Kind.DOCX,
        ),
        ("text, 1 MB", lambda: ("line of text\n" * 80_000).encode(), Kind.TEXT),
        ("pdf flate bomb (400 MiB)", lambda: documents.flate_bomb_pdf(400), Kind.PDF),
        ("pdf, 20,000-page tree", lambda: documents.many_pages_pdf(20_000), Kind.PDF),
        (
            "docx zip bomb (100 MiB)",
            lambda: documents.docx_with_member(documents.docx(["x"]), "word/media/a.bin", 100),
            Kind.DOCX,
        ),
    ]


async def _tick(done: asyncio.Event, gaps: list[float]) -> None:
    """Ask the loop for a turn every TICK_S until `done`; each turn's lateness goes in `gaps`."""
    last = time.monotonic()
    while not done.is_set():
        await asyncio.sleep(TICK_S)
        now = time.monotonic()
        gaps.append(now - last - TICK_S)
        last = now


async def _measure(at_once: int) -> list[dict[str, Any]]:
    from conversations.attachments.extraction import Unreadable, extracted_text

    rows = []
    for name, make, kind in _documents():
        data = make()
        gaps: list[float] = []
        done = asyncio.Event()
        ticker = asyncio.create_task(_tick(done, gaps))
        started = time.monotonic()
        outcomes = await asyncio.gather(
            *(extracted_text(data, kind) for _ in range(at_once)), return_exceptions=True
        )
        wall = time.monotonic() - started
        done.set()
        await ticker
        refused = [o for o in outcomes if isinstance(o, Unreadable)]
        failed = [o for o in outcomes if isinstance(o, BaseException) and o not in refused]
        if failed:
            raise failed[0]
        peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        rows.append(
            {
                "document": name,
                "bytes": len(data),
                "outcome": "refused" if refused else "read",
                "wall_s": round(wall, 3),
                "longest_gap_ms": round(max(gaps, default=0.0) * 1000, 1),
                "child_peak_mb": round(peak_kb / 1024),
            }
        )
    return rows


if __name__ == "__main__":
    main()

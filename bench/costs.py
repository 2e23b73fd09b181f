"""What one account's file or history costs the server: import time per node, memory per import,
memory per export page.

    python -m bench.costs                        # PostgreSQL, a database of its own
    python -m bench.costs --json bench/results/costs.json

Measured in this process on the code the server runs (conversations.imports.import_history, the
API's /api/export.jsonl through Django's test client):

- import time per node: a ChatGPT export whose one question sits under a chain of nodes without
  a message (the shape that cost the square of the chain), 10,000 to 100,000 nodes long;
- memory per import: the peak of Python's allocations (tracemalloc) while one conversation of
  4 to 16 MiB of JSON is imported, against the size of its JSON;
- memory per export page: the same peak for one page of export.jsonl (CHAT_EXPORT_PAGE_BYTES)
  of a history of long messages, against the page's size.
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import os
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import django

MIB = 1024 * 1024
MESSAGE_CHARS = 8_000
# (chain lengths, MiB of JSON of the imported conversations, conversations of 4 messages of
# 10,000 characters in the exported history) per mode; tiny is the tests' smoke run.
SIZES = {
    "quick": ((10_000, 25_000, 50_000, 100_000), (4, 16), 400),
    "tiny": ((1_000, 2_000), (1,), 8),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--database-url", default="postgres://postgres@127.0.0.1:5432/chatsite_costs_bench"
    )
    parser.add_argument("--mode", choices=sorted(SIZES), default="quick")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    chains, imports, exported = SIZES[args.mode]
    if args.database_url.startswith(("postgres://", "postgresql://")):
        from bench.server import ensure_database

        ensure_database(args.database_url)
    os.environ["DATABASE_URL"] = args.database_url
    # Measured in this process alone: the cache is its own (a shared one may hold an import
    # lease of another database's user of the same id).
    os.environ.pop("REDIS_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatsite.settings")
    os.environ.setdefault("DEBUG", "1")  # a settings module that needs no SECRET_KEY
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)
    owner = _fresh_user()
    report = {
        "import_chain": [_import_chain(owner, nodes) for nodes in chains],
        "import_memory": [_import_memory(owner, mib) for mib in imports],
        "export_page": _export_page(owner, exported),
    }
    _print(report)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2))


def _fresh_user() -> Any:
    from django.contrib.auth import get_user_model

    user, _ = get_user_model().objects.get_or_create(username="costs-bench")
    user.conversations.all().delete()
    return user


def _import_chain(owner: Any, nodes: int) -> dict[str, Any]:
    from conversations.imports.importer import import_history
    from tests.imports.sources import as_json, chatgpt_conversation, chatgpt_node

    chain = [chatgpt_node("root", None, None)]
    for i in range(nodes):
        chain.append(chatgpt_node(f"n{i}", chain[-1]["id"], None))
    chain.append(chatgpt_node("q", chain[-1]["id"], "user", "Is anyone there?", 1))
    data = as_json([chatgpt_conversation(f"c0ffee00-0000-4000-8000-{nodes:012d}", "", chain, "q")])
    started = time.perf_counter()
    report = import_history(owner=owner, file=io.BytesIO(data))
    seconds = time.perf_counter() - started
    assert len(report.imported) == 1, report
    owner.conversations.all().delete()
    return {
        "nodes": nodes,
        "file_mib": round(len(data) / MIB, 1),
        "seconds": round(seconds, 2),
        "us_per_node": round(seconds / nodes * 1e6, 1),
    }


def _import_memory(owner: Any, mib: int) -> dict[str, Any]:
    from conversations.imports.importer import import_history
    from tests.imports.sources import as_json, claude_conversation, claude_message

    conversation = claude_conversation(f"5ca1ab1e-0000-4000-8000-{mib:012d}")
    text = ("lorem ipsum dolor sit amet " * (MESSAGE_CHARS // 27 + 1))[:MESSAGE_CHARS]
    count = mib * MIB // (2 * MESSAGE_CHARS + 600)  # each message holds its text twice
    conversation["chat_messages"] = [
        claude_message(f"m{i}", "human" if i % 2 == 0 else "assistant", f"{i} {text}", i)
        for i in range(count)
    ]
    data = as_json([conversation])
    peak, seconds = _peak(lambda: import_history(owner=owner, file=io.BytesIO(data)))
    owner.conversations.all().delete()
    return {
        "json_mib": round(len(data) / MIB, 1),
        "messages": count,
        "peak_mib": round(peak / MIB, 1),
        "peak_per_json_byte": round(peak / len(data), 1),
        "seconds": round(seconds, 2),
    }


def _export_page(owner: Any, conversations: int) -> dict[str, Any]:
    from django.conf import settings
    from django.test import Client

    from conversations.services.tokens import api_token_create
    from tests.support.history import make_history

    text = " " + "x" * 10_000
    make_history(owner, conversations, 4, text, batch_size=500)
    _, key = api_token_create(user=owner, name="bench")
    client = Client(headers={"Authorization": f"Bearer {key}"}, HTTP_HOST="127.0.0.1")
    holder: dict[str, Any] = {}
    peak, seconds = _peak(lambda: holder.update(page=client.get("/api/export.jsonl")))
    page = holder["page"]
    assert page.status_code == 200, page.content[:200]
    body = b"".join(page.streaming_content) if page.streaming else page.content
    owner.conversations.all().delete()
    return {
        "history_mib": round(conversations * 4 * len(text) / MIB, 1),
        "page_limit_mib": round(settings.CHAT_EXPORT_PAGE_BYTES / MIB, 1),
        "page_mib": round(len(body) / MIB, 1),
        "peak_mib": round(peak / MIB, 1),
        "seconds": round(seconds, 2),
    }


def _peak(run: Callable[[], Any]) -> tuple[int, float]:
    """The peak of Python's allocations while `run` runs, above what was held before, and its
    time (slowed by tracemalloc: the time of a figure without it is in `_import_chain`)."""
    gc.collect()
    tracemalloc.start()
    tracemalloc.reset_peak()
    before = tracemalloc.get_traced_memory()[0]
    started = time.perf_counter()
    run()
    seconds = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1] - before
    tracemalloc.stop()
    return peak, seconds


def _print(report: dict[str, Any]) -> None:
    print("\nImport time per node (a chain of nodes without a message above one question):\n")
    print("| nodes   | file MiB | seconds | µs per node |")
    print("| ------- | -------- | ------- | ----------- |")
    for row in report["import_chain"]:
        print(
            f"| {row['nodes']:>7,} | {row['file_mib']:>8} | {row['seconds']:>7} "
            f"| {row['us_per_node']:>11} |"
        )
    print("\nMemory per import (one conversation; peak of Python's allocations):\n")
    print("| JSON MiB | messages | peak MiB | peak / JSON | seconds (traced) |")
    print("| -------- | -------- | -------- | ----------- | ---------------- |")
    for row in report["import_memory"]:
        print(
            f"| {row['json_mib']:>8} | {row['messages']:>8,} | {row['peak_mib']:>8} "
            f"| {row['peak_per_json_byte']:>10}x | {row['seconds']:>16} |"
        )
    page = report["export_page"]
    print(
        f"\nMemory per export page: a {page['history_mib']} MiB history, pages of "
        f"{page['page_limit_mib']} MiB: the first page is {page['page_mib']} MiB and its peak "
        f"{page['peak_mib']} MiB ({page['seconds']} s traced).\n"
    )


if __name__ == "__main__":
    main()

"""The staff's usage page at scale: 200,000 messages of 50 people in 5 groups over a year (100,000
replies of 3 models, each with its time to first token and tokens), and the ledger's rows for
them, as replies write them.

    python -m bench.usage                        # seeds once, then measures
    python -m bench.usage --repeat 50 --json bench/results/usage.json

It times the page (`/usage/`, rendered for a staff member through Django's test client: the
ledger's totals and the TTFT percentiles from their buckets) for each period it offers, and its
CSV. PostgreSQL by default, in a database of its own (created if missing); the history is kept,
and a later run with the same sizes reuses it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench.server import django_on
from bench.stats import summary

PEOPLE = 50
GROUPS = 5
MODELS = ("small", "medium", "large")
DAYS = 365
BATCH = 5_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--database-url", default="postgres://postgres@127.0.0.1:5432/chatsite_usage_bench"
    )
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=20, help="timed renders per period")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    os.environ.setdefault("ALLOWED_HOSTS", "testserver")
    django_on(args.database_url)
    _seeded(args.messages)
    report = {"database": _vendor(), "messages": args.messages, "pages": _measure(args.repeat)}
    _print(report)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2))


def _vendor() -> str:
    from django.db import connection

    return connection.vendor


def _seeded(messages: int) -> None:
    from django.db import connection

    from conversations.models import Message

    if Message.objects.count() != messages:
        started = time.monotonic()
        _seed(messages)
        print(f"seeded {messages} messages in {time.monotonic() - started:.0f} s")
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:  # what autovacuum does to new rows, before measuring
            cursor.execute("VACUUM ANALYZE conversations_message")
            cursor.execute("VACUUM ANALYZE conversations_tokenusage")


def _seed(messages: int) -> None:
    """Turns of a question and a reply, spread over the year; each reply's tokens go into the
    ledger, and its time to first token into its bucket, as rows.finish writes them."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.utils import timezone

    from conversations.models import Conversation, FirstTokenTimes, Message, TokenUsage

    rng = random.Random(26)
    Message.objects.all().delete()
    Conversation.objects.all().delete()
    TokenUsage.objects.all().delete()
    FirstTokenTimes.objects.all().delete()
    users = get_user_model().objects
    users.filter(username__startswith="usage-").delete()
    groups = [Group.objects.get_or_create(name=f"usage-team-{n}")[0] for n in range(GROUPS)]
    people = [users.create_user(f"usage-{n}") for n in range(PEOPLE)]
    for n, person in enumerate(people):
        person.groups.add(groups[n % GROUPS])
    users.filter(username="usage-staff").delete()
    users.create_superuser("usage-staff", "staff@example.com", "usage-staff")

    today = timezone.localdate()
    # The replies' times are the year's, not now: auto_now_add would overwrite them on insert,
    # and a bulk_update of 200,000 rows afterwards costs minutes.
    created_at = Message._meta.get_field("created_at")
    created_at.auto_now_add = False  # type: ignore[attr-defined]
    try:
        ledger, buckets = _write(rng, people, messages // 2, today)
    finally:
        created_at.auto_now_add = True  # type: ignore[attr-defined]
    TokenUsage.objects.bulk_create(ledger.values(), batch_size=BATCH)
    FirstTokenTimes.objects.bulk_create(
        [
            FirstTokenTimes(day=day, model_slug=model, bucket=bucket, replies=replies)
            for (day, model, bucket), replies in buckets.items()
        ],
        batch_size=BATCH,
    )


def _write(
    rng: random.Random, people: list[Any], turns: int, today: Any
) -> tuple[dict[tuple[int, Any, str], Any], Counter[tuple[Any, str, int]]]:
    from django.db import transaction

    from conversations.models import Conversation, FirstTokenTimes, Message, TokenUsage
    from conversations.services.budgets import midnight

    ledger: dict[tuple[int, Any, str], TokenUsage] = {}
    buckets: Counter[tuple[Any, str, int]] = Counter()
    per_conversation = 10
    with transaction.atomic():
        for start in range(0, turns, BATCH):
            count = min(BATCH, turns - start)
            owners = [rng.choice(people) for _ in range(count // per_conversation + 1)]
            chats = Conversation.objects.bulk_create(
                [Conversation(owner=owner, title="Usage bench") for owner in owners]
            )
            rows = []
            for n in range(count):
                chat = chats[n // per_conversation]
                day = today - timedelta(days=rng.randrange(DAYS))
                at = midnight(day) + timedelta(seconds=rng.randrange(86_400))
                model = rng.choice(MODELS)
                prompt, completion = rng.randint(20, 2_000), rng.randint(10, 800)
                cancelled = rng.random() < 0.05
                ttft_ms = rng.lognormvariate(5, 0.6)
                rows.append(Message(conversation=chat, role="user", content="q", created_at=at))
                rows.append(
                    Message(
                        conversation=chat,
                        role="assistant",
                        content="a",
                        status="cancelled" if cancelled else "complete",
                        model_slug=model,
                        prompt_tokens=prompt,
                        completion_tokens=completion,
                        created_at=at,
                        first_token_at=at + timedelta(milliseconds=ttft_ms),
                    )
                )
                usage = ledger.setdefault(
                    (chat.owner_id, day, model),
                    TokenUsage(user_id=chat.owner_id, day=day, model_slug=model),
                )
                usage.replies += 1
                usage.cancelled += cancelled
                usage.prompt_tokens += prompt
                usage.completion_tokens += completion
                buckets[(day, model, FirstTokenTimes.bucket_of(ttft_ms))] += 1
            Message.objects.bulk_create(rows)
    return ledger, buckets


def _measure(repeat: int) -> list[dict[str, Any]]:
    from django.contrib.auth import get_user_model
    from django.test import Client

    from conversations.pages.usage import PERIODS

    client = Client()
    client.force_login(get_user_model().objects.get(username="usage-staff"))
    results = []
    for days, fmt in [(days, "html") for days in PERIODS] + [(365, "csv")]:
        query = {"days": days, **({"format": "csv"} if fmt == "csv" else {})}
        assert client.get("/usage/", query).status_code == 200  # and warm the caches
        times = []
        for _ in range(repeat):
            started = time.perf_counter()
            response = client.get("/usage/", query)
            times.append((time.perf_counter() - started) * 1000)
            assert response.status_code == 200
        results.append({"days": days, "format": fmt, "ms": summary(times)})
    return results


def _print(report: dict[str, Any]) -> None:
    print(f"usage page, {report['database']}, {report['messages']} messages")
    print(f"{'period':>8} {'format':>6} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
    for page in report["pages"]:
        ms = page["ms"]
        print(
            f"{page['days']:>7}d {page['format']:>6} {ms['p50']:>8.1f} {ms['p95']:>8.1f} {ms['max']:>8.1f}"
        )


if __name__ == "__main__":
    main()

"""Search at scale: one user's 10,000 conversations and 200,000 messages, searched for words
from the most common to none at all.

    python -m bench.search                       # seeds the history once, then measures
    python -m bench.search --repeat 50 --json bench/results/search.json
    python -m bench.search --other-messages 200000   # with a second user's 200,000 messages

It times conversations.search.search() in this process (the page's search: the ranked query,
then the page's snippets, titles and branches) and the API's exact filter with its count, and
shows which index each query's plan reads; then the pages opened all day at that size, the
conversation list with its sidebar and a conversation (bench/pages.py). PostgreSQL by default, in a database of its own
(created if missing); a SQLite URL measures the fallback. The history is made by
`manage.py seed_search_data` and kept: a later run with the same sizes reuses it.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path
from typing import Any

from bench import pages
from bench.server import django_on
from bench.stats import summary

# (what is typed, what it stands for); the words' frequencies come from seed_search_data.
TERMS = [
    ("the", "a word in nearly every message"),
    ("python", "a common word (1 message in 7)"),
    ("deploy", "a prefix (deployment, deploying)"),
    ("kubernetes", "a rare word"),
    ("python deploy", "two words, the last a prefix"),
    ('"python the"', "a phrase"),
    ("zeppelin", "a very rare word"),
    ("zzyzx", "no match"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--database-url", default="postgres://postgres@127.0.0.1:5432/chatsite_search_bench"
    )
    parser.add_argument("--user", default="search-bench")
    parser.add_argument("--conversations", type=int, default=10_000)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument(
        "--other-messages",
        type=int,
        default=0,
        help="messages of a second user (--other-user), searched past: a query's cost should "
        "not grow with them",
    )
    parser.add_argument("--other-user", default="search-bench-other")
    parser.add_argument("--repeat", type=int, default=30, help="timed runs per term")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    django_on(args.database_url)
    user = _seeded_user(args.user, args.conversations, args.messages)
    if args.other_messages:
        _seeded_user(args.other_user, max(1, args.other_messages // 20), args.other_messages)
    report = {
        "database": _vendor(),
        "conversations": args.conversations,
        "messages": args.messages,
        "other_user_messages": _messages_of_others(user),
        "terms": [_measure(user, term, meaning, args.repeat) for term, meaning in TERMS],
        "pages": pages.measure(user, args.repeat),
    }
    _print(report)
    pages.print_table(report["pages"])
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2))


def _vendor() -> str:
    from django.db import connection

    return connection.vendor


def _messages_of_others(user: Any) -> int:
    from conversations.models import Message

    return Message.objects.exclude(conversation__owner=user).count()


def _seeded_user(username: str, conversations: int, messages: int) -> Any:
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection

    from conversations.models import Conversation, Message

    user = get_user_model().objects.filter(username=username).first()
    has = (
        Conversation.objects.filter(owner=user).count(),
        Message.objects.filter(conversation__owner=user).count(),
    )
    if user is None or has != (conversations, messages):
        started = time.monotonic()
        call_command(
            "seed_search_data", user=username, conversations=conversations, messages=messages
        )
        print(f"seeded {username} in {time.monotonic() - started:.0f} s")
        user = get_user_model().objects.get(username=username)
    if connection.vendor == "postgresql":
        # What autovacuum does to new rows (statistics, the visibility map), before measuring.
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE conversations_message")
            cursor.execute("VACUUM ANALYZE conversations_conversation")
    return user


def _measure(user: Any, term: str, meaning: str, repeat: int) -> dict[str, Any]:
    from conversations import search
    from conversations.models import Conversation

    def page() -> int:
        return len(search.search(user, term).hits)

    def api_count() -> int:
        return search.filter_matching(Conversation.objects.visible_to(user), term).count()

    found, matching = page(), api_count()  # and warm the cache
    return {
        "term": term,
        "meaning": meaning,
        "results_on_page": found,
        "matching_conversations": matching,
        "page_ms": summary(_timed(page, repeat)),
        "api_count_ms": summary(_timed(api_count, max(5, repeat // 3))),
        "plan": _plan(user.pk, term),
    }


def _timed(run: Any, repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append((time.perf_counter() - started) * 1000)
    return times


def _plan(owner_id: int, term: str) -> str:
    """How the ranked query finds messages and titles: the scan nodes of its plan."""
    from django.db import connection

    from conversations import search

    if connection.vendor != "postgresql":
        return "contains (no index)"
    text = search.clean(term)
    with connection.cursor() as cursor:
        recent_first = search.recent_first(cursor, text, owner_id=owner_id)
        sql, params = search.ranked_sql(owner_id, text, 0, recent_first=recent_first)
        cursor.execute("EXPLAIN " + sql, params)
        lines = [row[0] for row in cursor.fetchall()]
    scans = [
        re.sub(r"\s+\(cost.*", "", line).strip(" ->")
        for line in lines
        if re.search(r"Scan .*(on|using) conversations_(message|conversation)", line)
    ]
    way = "newest first" if recent_first else "through the index"
    return f"{way}: " + "; ".join(
        dict.fromkeys(s for s in scans if "_search" in s or "Backward" in s)
    )


def _print(report: dict[str, Any]) -> None:
    print(
        f"\n{report['database']}: {report['conversations']:,} conversations, "
        f"{report['messages']:,} messages of one user; other users' messages: "
        f"{report['other_user_messages']:,}. Times in ms: p50 / p95 / max.\n"
    )
    print(f"| {'query':<16} | {'what':<34} | found | page search        | API count          |")
    print(f"| {'-' * 16} | {'-' * 34} | ----- | ------------------ | ------------------ |")
    for row in report["terms"]:
        page, api = row["page_ms"], row["api_count_ms"]
        print(
            f"| {row['term']:<16} | {row['meaning']:<34} | {row['matching_conversations']:>5} "
            f"| {page['p50']:>5} / {page['p95']:>5} / {page['max']:>5} "
            f"| {api['p50']:>5} / {api['p95']:>5} / {api['max']:>5} |"
        )
    print("\nPlans (the ranked query's scans):")
    for row in report["terms"]:
        print(f"  {row['term']}: {row['plan']}")


if __name__ == "__main__":
    main()

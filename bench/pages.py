"""The pages a person opens all day, at the search bench's size with a team's organisation
(projects, pins, an archive): the conversation list (the sidebar's first page: projects,
pinned, the newest by date), the sidebar's next page, and a conversation opened, each rendered
server-side by the Django test client in this process (no network, no browser: the server's
share of the wait). Run by `python -m bench.search` on the history it seeds.
"""

from __future__ import annotations

from typing import Any

from bench.stats import summary

TARGET_P95_MS = 100.0  # issue 29: each of these within 100 ms at p95
PROJECTS = 25  # the bench user's projects, a conversation in PROJECT_EVERY in one of them
PROJECT_EVERY = 10
PINNED = 12


def organise(user: Any) -> None:
    """Give the bench's history the organisation a team's has: PROJECTS projects holding one
    conversation in PROJECT_EVERY, PINNED pinned ones, one in fifty archived. Done once; the
    conversations keep their dates (the sidebar's groups stay as seeded)."""
    from conversations.models import Conversation, Project

    if Project.objects.filter(owner=user).exists():
        return
    projects = Project.objects.bulk_create(
        Project(owner=user, name=f"Project {number}") for number in range(PROJECTS)
    )
    ids = list(Conversation.objects.filter(owner=user).order_by("pk").values_list("pk", flat=True))
    for index, project in enumerate(projects):
        Conversation.objects.filter(pk__in=ids[index::PROJECTS][::PROJECT_EVERY]).update(
            project=project
        )
    Conversation.objects.filter(pk__in=ids[1::50]).update(archived=True)
    Conversation.objects.filter(pk__in=ids[3 : 3 + PINNED * 7 : 7]).update(pinned=True)


def measure(user: Any, repeat: int) -> list[dict[str, Any]]:
    from django.conf import settings
    from django.db.models import Count
    from django.test import Client
    from django.urls import reverse

    from conversations.models import Conversation, Message

    if "testserver" not in settings.ALLOWED_HOSTS:
        settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    # As served: the bench's settings module runs with DEBUG for its own sake, and DEBUG keeps
    # every query's SQL and renders templates with their debug information.
    settings.DEBUG = False
    client = Client()
    client.force_login(user)
    organise(user)
    newest = Conversation.objects.filter(owner=user).order_by("-updated_at").first()
    assert newest is not None, "the bench's history has no conversation"
    # The longest conversation: what opening one costs at its worst here.
    longest_id, longest_count = (
        Message.objects.filter(conversation__owner=user)
        .values_list("conversation_id")
        .annotate(n=Count("pk"))
        .order_by("-n")
        .first()
    ) or (newest.pk, 0)
    pages = [
        ("conversation list", reverse("conversation-list")),
        ("sidebar, next page", reverse("conversation-sidebar") + "?page=2"),
        ("newest conversation", reverse("conversation-detail", args=[newest.pk])),
        (
            f"longest conversation ({longest_count} messages)",
            reverse("conversation-detail", args=[longest_id]),
        ),
    ]
    return [_page(client, name, url, repeat) for name, url in pages]


def _page(client: Any, name: str, url: str, repeat: int) -> dict[str, Any]:
    import time

    first = client.get(url)
    assert first.status_code == 200, f"{url} answered {first.status_code}"
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        client.get(url)
        times.append((time.perf_counter() - started) * 1000)
    figures = summary(times)
    return {
        "page": name,
        "bytes": len(first.content),
        "ms": figures,
        "within_target": figures["p95"] <= TARGET_P95_MS,
    }


def print_table(rows: list[dict[str, Any]]) -> None:
    print(f"\nPages, server-side (ms: p50 / p95 / max; target p95 <= {TARGET_P95_MS:.0f}):")
    print(f"| {'page':<40} | {'KB':>6} | {'p50 / p95 / max':<22} | ok |")
    print(f"| {'-' * 40} | {'-' * 6} | {'-' * 22} | -- |")
    for row in rows:
        ms = row["ms"]
        print(
            f"| {row['page']:<40} | {row['bytes'] / 1024:>6.1f} "
            f"| {ms['p50']:>6} / {ms['p95']:>6} / {ms['max']:>6} "
            f"| {'yes' if row['within_target'] else 'NO':<2} |"
        )

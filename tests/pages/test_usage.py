"""The staff's usage page (issue 26): its totals per day, person, group and model are the sums of
the replies (cancelled ones and API calls included, deleted ones too), priced by the model; the
same as CSV; for staff with the permission only."""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.models import F
from django.utils import formats, timezone

from conversations.models import ChatModel, Conversation, FirstTokenTimes, Message, TokenUsage
from conversations.services import budgets

pytestmark = [pytest.mark.django_db]


def reply(
    user: Any,
    model: str,
    prompt: int,
    completion: int,
    *,
    cancelled: bool = False,
    ttft_ms: float | None = None,
) -> None:
    """A reply saved as a generation saves it: the row, and its tokens in the ledger."""
    conversation = Conversation.objects.create(owner=user)
    Message.objects.create(
        conversation=conversation,
        role=Message.Role.ASSISTANT,
        status=Message.Status.CANCELLED if cancelled else Message.Status.COMPLETE,
        model_slug=model,
        prompt_tokens=prompt,
        completion_tokens=completion,
    )
    budgets.record_usage(
        user_id=user.pk,
        model_slug=model,
        prompt_tokens=prompt,
        completion_tokens=completion,
        cancelled=cancelled,
        ttft_ms=ttft_ms,
    )


@pytest.fixture
def reviewer(django_user_model: Any) -> Any:
    user = django_user_model.objects.create_user("reviewer", password="x", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_tokenusage"))
    return user


@pytest.fixture
def history(users: dict[str, Any]) -> dict[str, Any]:
    alice, bob = users["alice"], users["bob"]
    research = Group.objects.create(name="research")
    alice.groups.add(research)
    ChatModel.objects.create(
        slug="big",
        name="Big",
        backend="scripted",
        price_prompt_per_million=Decimal("2"),
        price_completion_per_million=Decimal("10"),
    )
    reply(alice, "big", 1000, 200)
    reply(alice, "big", 500, 100, cancelled=True)
    reply(alice, "default", 300, 30)
    reply(bob, "big", 4000, 400)
    # Yesterday's, and one whose conversation alice deleted since: both still count.
    TokenUsage.objects.create(
        user=bob,
        day=timezone.localdate() - timedelta(days=1),
        model_slug="default",
        replies=1,
        prompt_tokens=7,
        completion_tokens=3,
    )
    reply(alice, "default", 11, 1)
    Conversation.objects.filter(owner=alice).order_by("-created_at").first().delete()  # type: ignore[union-attr]
    return {"alice": alice, "bob": bob}


def csv_of(client: Any) -> dict[tuple[str, str], dict[str, str]]:
    response = client.get("/usage/?days=7&format=csv")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    rows = csv.DictReader(io.StringIO(response.content.decode()))
    return {(row["section"], row["label"]): row for row in rows}


def test_the_totals_are_the_sums_of_the_replies_per_day_person_group_and_model(
    client: Any, reviewer: Any, history: dict[str, Any]
) -> None:
    client.force_login(reviewer)
    rows = csv_of(client)
    today = str(timezone.localdate())
    yesterday = str(timezone.localdate() - timedelta(days=1))

    alice_tokens = 1200 + 600 + 330 + 12
    assert rows[("person", "alice")]["tokens"] == str(alice_tokens)
    assert rows[("person", "alice")]["replies"] == "4"
    assert rows[("person", "alice")]["cancelled"] == "1"
    assert rows[("person", "bob")]["tokens"] == str(4400 + 10)
    assert rows[("group", "research")]["tokens"] == str(alice_tokens)  # bob is in no group
    assert rows[("day", today)]["tokens"] == str(alice_tokens + 4400)
    assert rows[("day", yesterday)]["tokens"] == "10"
    assert rows[("model", "big")]["tokens"] == str(1200 + 600 + 4400)
    assert rows[("total", "all")]["tokens"] == str(alice_tokens + 4410)
    # Big costs 2 a million prompt tokens and 10 a million reply tokens; default is not priced.
    big_cost = (Decimal(5500) * 2 + Decimal(700) * 10) / 1_000_000
    assert Decimal(rows[("model", "big")]["cost"]) == big_cost
    assert rows[("model", "default")]["cost"] == ""
    assert Decimal(rows[("person", "bob")]["cost"]) == (Decimal(4000) * 2 + 400 * 10) / 1_000_000


def test_the_page_shows_the_tables_and_a_bar_a_day(
    client: Any, reviewer: Any, history: dict[str, Any]
) -> None:
    client.force_login(reviewer)
    page = client.get("/usage/").content.decode()  # the last 30 days
    assert page.count("<rect ") == 30
    # The day and the count as the page's language writes them (English here: "Dec. 3, 2026: 6,542").
    day = formats.date_format(timezone.localdate(), "DATE_FORMAT")
    tokens = formats.number_format(1200 + 600 + 330 + 12 + 4400, force_grouping=True)
    assert f"{day}: {tokens} tokens" in page
    assert '<th scope="row">research</th>' in page
    assert "Download CSV" in page


def test_a_labels_formula_is_not_a_formula_in_the_csv(
    client: Any, reviewer: Any, django_user_model: Any
) -> None:
    mallory = django_user_model.objects.create_user("=HYPERLINK(1)", password="x")
    reply(mallory, "default", 1, 1)
    client.force_login(reviewer)
    assert ("person", "'=HYPERLINK(1)") in csv_of(client)


def test_only_staff_with_the_permission_see_it(client: Any, users: dict[str, Any]) -> None:
    client.force_login(users["alice"])
    assert client.get("/usage/").status_code == 403
    assert client.get("/usage/?format=csv").status_code == 403
    client.logout()
    assert client.get("/usage/").status_code == 302  # to the login page


def test_the_time_to_first_token_per_model_comes_from_the_periods_buckets(
    client: Any, reviewer: Any, users: dict[str, Any]
) -> None:
    # 20 replies: 100 ms to 2,000 ms, 100 ms apart; and one before the period, far slower.
    for ms in range(100, 2001, 100):
        reply(users["alice"], "big", 10, 1, ttft_ms=ms)
    long_ago = timezone.localdate() - timedelta(days=400)
    FirstTokenTimes.objects.create(
        day=long_ago, model_slug="big", bucket=FirstTokenTimes.bucket_of(60_000), replies=50
    )
    client.force_login(reviewer)
    big = csv_of(client)[("model", "big")]
    # The 10th and the 19th of the 20 (nearest rank), each within 5% (a bucket's half-width).
    p50, p95 = float(big["ttft_p50_ms"]), float(big["ttft_p95_ms"])
    assert 1000 / 1.05 <= p50 <= 1000 * 1.05
    assert 1900 / 1.05 <= p95 <= 1900 * 1.05
    # Deleting the replies leaves what they took, as it leaves their tokens.
    Message.objects.all().delete()
    assert csv_of(client)[("model", "big")]["ttft_p50_ms"] == big["ttft_p50_ms"]


@pytest.mark.django_db(transaction=True)
def test_the_migration_buckets_the_replies_saved_before_it(users: dict[str, Any]) -> None:
    for ms in (150, 150, 3_000):
        reply(users["alice"], "big", 10, 1)
        Message.objects.filter(pk=Message.objects.latest("id").pk).update(
            first_token_at=F("created_at") + timedelta(milliseconds=ms)
        )
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes("conversations")
    executor.migrate([("conversations", "0019_audit_log")])  # before the buckets were kept
    executor = MigrationExecutor(connection)
    executor.migrate(latest)

    buckets = {(row.model_slug, row.bucket): row.replies for row in FirstTokenTimes.objects.all()}
    bucket_of = FirstTokenTimes.bucket_of
    assert buckets == {("big", bucket_of(150)): 2, ("big", bucket_of(3_000)): 1}

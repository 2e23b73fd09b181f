"""The staff's usage page: tokens, replies, cancelled share and cost per day, person, group and
model over a period, from the TokenUsage ledger (a row per user, day and model, so a year of a
large team is thousands of rows, not the messages), and the time to first token per model from
the FirstTokenTimes rollup (a row per day, model and bucket): neither reads a message."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import QuerySet, Sum

from conversations.models import ChatModel, FirstTokenTimes, TokenUsage

MILLION = Decimal(1_000_000)
User = get_user_model()


@dataclass
class Totals:
    """One line of the report: a day, a person, a group or a model, or everything."""

    label: str
    replies: int = 0
    cancelled: int = 0
    titles: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: Decimal | None = None  # None: no model of the line is priced
    ttft_p50_ms: float | None = None
    ttft_p95_ms: float | None = None

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def cancelled_share(self) -> float:
        return self.cancelled / self.replies if self.replies else 0.0


@dataclass
class Report:
    since: date
    until: date
    total: Totals
    by_day: list[Totals] = field(default_factory=list)
    by_person: list[Totals] = field(default_factory=list)
    by_group: list[Totals] = field(default_factory=list)
    by_model: list[Totals] = field(default_factory=list)


def report(since: date, until: date) -> Report:
    """Everything used from `since` to `until`, both days included.

    Two sums of the ledger (per day and model, per person and model) make every table: the
    models' and the total from the first, the groups' from the second, so a long period costs
    two scans of its rows, not five."""
    rows = TokenUsage.objects.filter(day__gte=since, day__lte=until)
    prices = _prices()
    per_day = _grouped(rows, "day")
    per_person = _grouped(rows, "user__username", "user_id")
    everything = [sums for _, group in per_day for sums in group]
    total = _totals("all", everything, prices)
    by_day = [_totals(str(day), group, prices) for day, group in per_day]
    by_person = [
        _totals(username or "(deleted account)", group, prices) for username, group in per_person
    ]
    by_model = [
        _totals(slug, group, prices) for slug, group in _by_key(everything, "model_slug").items()
    ]
    by_group = [_totals(name, group, prices) for name, group in _per_group(per_person).items()]
    ttft = ttft_by_model(since, until)
    for line in by_model:
        line.ttft_p50_ms, line.ttft_p95_ms = ttft.get(line.label, (None, None))
    return Report(since, until, total, by_day, by_person, by_group, by_model)


def _per_group(
    per_person: list[tuple[Any, list[dict[str, Any]]]],
) -> dict[str, list[dict[str, Any]]]:
    """Each group's members' sums. A person in two groups counts in both: each group's line is
    its members' whole use."""
    members = [group[0]["user_id"] for _, group in per_person if group[0]["user_id"] is not None]
    groups_of: dict[int, list[str]] = {}
    memberships = User.groups.through.objects.filter(user_id__in=members)
    for user_id, name in memberships.values_list("user_id", "group__name").order_by("group__name"):
        groups_of.setdefault(user_id, []).append(name)
    lines: dict[str, list[dict[str, Any]]] = {}
    for _, group in per_person:
        for name in groups_of.get(group[0]["user_id"], []):
            lines.setdefault(name, []).extend(group)
    return dict(sorted(lines.items()))


def _by_key(sums: list[dict[str, Any]], key: str) -> dict[Any, list[dict[str, Any]]]:
    lines: dict[Any, list[dict[str, Any]]] = {}
    for one in sums:
        lines.setdefault(one[key], []).append(one)
    return dict(sorted(lines.items()))


def _prices() -> dict[str, tuple[Decimal | None, Decimal | None]]:
    return {
        slug: (prompt, completion)
        for slug, prompt, completion in ChatModel.objects.values_list(
            "slug", "price_prompt_per_million", "price_completion_per_million"
        )
    }


SUMS = {
    "replies": Sum("replies"),
    "cancelled": Sum("cancelled"),
    "titles": Sum("titles"),
    "prompt_tokens": Sum("prompt_tokens"),
    "completion_tokens": Sum("completion_tokens"),
}


def _grouped(rows: QuerySet[TokenUsage], *keys: str) -> list[tuple[Any, list[dict[str, Any]]]]:
    """Per the first of `keys`, the sums of each model (the cost is per model): [(key, [sums])]."""
    lines: dict[Any, list[dict[str, Any]]] = {}
    for sums in rows.values(*keys, "model_slug").annotate(**SUMS).order_by(*keys, "model_slug"):
        lines.setdefault(sums[keys[0]], []).append(sums)
    return list(lines.items())


def _totals(label: str, per_model: list[dict[str, Any]], prices: Any) -> Totals:
    line = Totals(label)
    for sums in per_model:
        line.replies += sums["replies"] or 0
        line.cancelled += sums["cancelled"] or 0
        line.titles += sums["titles"] or 0
        line.prompt_tokens += sums["prompt_tokens"] or 0
        line.completion_tokens += sums["completion_tokens"] or 0
        prompt_price, completion_price = prices.get(sums["model_slug"], (None, None))
        if prompt_price is not None or completion_price is not None:
            cost = (sums["prompt_tokens"] or 0) * (prompt_price or 0) / MILLION
            cost += (sums["completion_tokens"] or 0) * (completion_price or 0) / MILLION
            line.cost = (line.cost or Decimal(0)) + cost
    return line


def ttft_by_model(since: date, until: date) -> dict[str, tuple[float | None, float | None]]:
    """Each model's p50 and p95 time to first token (ms) over the period's replies, from their
    buckets (within 5%): the nearest rank's bucket, as a bucket holds no finer times."""
    counts = (
        FirstTokenTimes.objects.filter(day__gte=since, day__lte=until)
        .values_list("model_slug", "bucket")
        .annotate(replies=Sum("replies"))
        .order_by("model_slug", "bucket")
    )
    buckets: dict[str, list[tuple[int, int]]] = {}
    for slug, bucket, replies in counts:
        buckets.setdefault(slug, []).append((bucket, replies))
    return {
        slug: (_nearest_rank(found, 0.5), _nearest_rank(found, 0.95))
        for slug, found in buckets.items()
    }


def _nearest_rank(buckets: list[tuple[int, int]], fraction: float) -> float | None:
    """The time of the bucket holding the ceil(fraction * n)-th reply, buckets in order."""
    total = sum(replies for _, replies in buckets)
    rank = max(1, math.ceil(fraction * total))
    seen = 0
    for bucket, replies in buckets:
        seen += replies
        if seen >= rank:
            return round(FirstTokenTimes.ms_of(bucket), 1)
    return None

"""The staff's usage page: tokens, replies, cancelled share and cost per day, person, group and
model over a period, from the TokenUsage ledger (a row per user, day and model, so a year of a
large team is thousands of rows, not the messages), and the time to first token per model from
the replies of the period (PostgreSQL's percentile_cont over an index on the replies' start)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

from django.db import connection
from django.db.models import Aggregate, F, FloatField, QuerySet, Sum
from django.db.models.functions import Extract

from conversations.models import ChatModel, Message, TokenUsage
from conversations.services.budgets import midnight

MILLION = Decimal(1_000_000)


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
    """Everything used from `since` to `until`, both days included."""
    rows = TokenUsage.objects.filter(day__gte=since, day__lte=until)
    prices = _prices()
    total = _one(rows, "all", prices)
    by_day = [_totals(str(key), group, prices) for key, group in _grouped(rows, "day")]
    by_person = [
        _totals(key or "(deleted account)", group, prices)
        for key, group in _grouped(rows, "user__username")
    ]
    # A person in two groups counts in both: each group's line is its members' whole use.
    by_group = [
        _totals(key, group, prices)
        for key, group in _grouped(rows.filter(user__groups__isnull=False), "user__groups__name")
    ]
    by_model = [_totals(key, group, prices) for key, group in _grouped(rows, "model_slug")]
    ttft = ttft_by_model(since, until)
    for line in by_model:
        line.ttft_p50_ms, line.ttft_p95_ms = ttft.get(line.label, (None, None))
    return Report(since, until, total, by_day, by_person, by_group, by_model)


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


def _grouped(rows: QuerySet[TokenUsage], key: str) -> list[tuple[Any, list[dict[str, Any]]]]:
    """Per `key`, the sums of each model (the cost is per model): [(key, [sums...])]."""
    lines: dict[Any, list[dict[str, Any]]] = {}
    for sums in rows.values(key, "model_slug").annotate(**SUMS).order_by(key, "model_slug"):
        lines.setdefault(sums[key], []).append(sums)
    return list(lines.items())


def _one(rows: QuerySet[TokenUsage], label: str, prices: Any) -> Totals:
    per_model: list[dict[str, Any]] = [dict(s) for s in rows.values("model_slug").annotate(**SUMS)]
    return _totals(label, per_model, prices)


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


class _Percentile(Aggregate):
    """PostgreSQL's percentile_cont, which Django does not ship."""

    function = "PERCENTILE_CONT"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()


def ttft_by_model(since: date, until: date) -> dict[str, tuple[float | None, float | None]]:
    """Each model's p50 and p95 time to first token (ms) over the period's replies."""
    replies = Message.objects.filter(
        role=Message.Role.ASSISTANT,
        created_at__gte=midnight(since),
        created_at__lt=midnight(until + timedelta(days=1)),
        first_token_at__isnull=False,
    )
    ttft = Extract(F("first_token_at") - F("created_at"), "epoch") * 1000
    if connection.vendor == "postgresql":
        found = replies.values("model_slug").annotate(
            p50=_Percentile(ttft, fraction=0.5), p95=_Percentile(ttft, fraction=0.95)
        )
        return {row["model_slug"]: (row["p50"], row["p95"]) for row in found}
    # SQLite (one person's laptop): few replies, read and sorted here.
    times: dict[str, list[float]] = {}
    for slug, started, first in replies.values_list("model_slug", "created_at", "first_token_at"):
        if first is not None:
            times.setdefault(slug, []).append((first - started).total_seconds() * 1000)
    return {slug: _quantiles(values) for slug, values in times.items()}


def _quantiles(values: list[float]) -> tuple[float | None, float | None]:
    if len(values) < 2:
        return (values[0], values[0]) if values else (None, None)
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return statistics.median(values), cuts[94]

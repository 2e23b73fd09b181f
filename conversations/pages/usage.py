"""The staff's usage page: tokens, replies, cancelled share, cost and time to first token per
day, person, group and model over a period, a chart of tokens a day, and the same as CSV.

For staff given "Can view token usage" (superusers have it); anyone else is refused (403).
"""

from __future__ import annotations

import csv
from datetime import timedelta

from django.contrib.auth.decorators import login_required, permission_required
from django.http import HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from conversations.services.usage_report import Report, Totals, report
from conversations.types import AuthenticatedHttpRequest

PERIODS = (7, 30, 90, 365)  # days, the page's choices
DEFAULT_PERIOD = 30
CHART_HEIGHT = 120  # px of the tallest bar


@login_required
@permission_required("conversations.view_tokenusage", raise_exception=True)
@require_GET
def usage(request: AuthenticatedHttpRequest) -> HttpResponse:
    days = _days(request.GET.get("days", ""))
    until = timezone.localdate()
    shown = report(until - timedelta(days=days - 1), until)
    if request.GET.get("format") == "csv":
        return _csv(shown)
    return render(
        request,
        "conversations/usage.html",
        {"report": shown, "days": days, "periods": PERIODS, "chart": _chart(shown)},
    )


def _days(asked: str) -> int:
    return int(asked) if asked.isdigit() and int(asked) in PERIODS else DEFAULT_PERIOD


def _chart(shown: Report) -> list[dict[str, object]]:
    """A bar a day of the period (days without use too), its height and its tokens."""
    tokens = {line.label: line.tokens for line in shown.by_day}
    every_day = [
        shown.since + timedelta(days=n) for n in range((shown.until - shown.since).days + 1)
    ]
    tallest = max(tokens.values(), default=0) or 1
    bars = []
    for index, day in enumerate(every_day):
        height = round(tokens.get(str(day), 0) / tallest * CHART_HEIGHT)
        bars.append(
            {
                "day": day,
                "tokens": tokens.get(str(day), 0),
                "x": index * 10,
                "y": CHART_HEIGHT - height,
                "height": height,
            }
        )
    return bars


CSV_COLUMNS = [
    "section",
    "label",
    "replies",
    "cancelled",
    "titles",
    "prompt_tokens",
    "completion_tokens",
    "tokens",
    "cost",
    "ttft_p50_ms",
    "ttft_p95_ms",
]


def _csv(shown: Report) -> HttpResponse:
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    name = f"chatsite-usage-{shown.since:%Y%m%d}-{shown.until:%Y%m%d}.csv"
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    out = csv.writer(response)
    out.writerow(CSV_COLUMNS)
    sections: list[tuple[str, list[Totals]]] = [
        ("total", [shown.total]),
        ("day", shown.by_day),
        ("person", shown.by_person),
        ("group", shown.by_group),
        ("model", shown.by_model),
    ]
    for section, lines in sections:
        for line in lines:
            out.writerow(
                [
                    section,
                    _safe(line.label),
                    line.replies,
                    line.cancelled,
                    line.titles,
                    line.prompt_tokens,
                    line.completion_tokens,
                    line.tokens,
                    "" if line.cost is None else f"{line.cost:.4f}",
                    "" if line.ttft_p50_ms is None else round(line.ttft_p50_ms),
                    "" if line.ttft_p95_ms is None else round(line.ttft_p95_ms),
                ]
            )
    return response


def _safe(label: str) -> str:
    """A label a spreadsheet will not run as a formula (a username or group may start with =)."""
    return "'" + label if label[:1] in ("=", "+", "-", "@", "\t", "\r") else label

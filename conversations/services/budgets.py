"""Token budgets: how many tokens a user may use a day and a month, how many they used, and the
refusal of a reply (or a title) that would start past either.

Which budget applies, for each period on its own: the user's Budget if it sets that period, else
the most generous of their groups' Budgets that set it (0, no limit, being the most generous),
else CHAT_TOKENS_PER_DAY or CHAT_TOKENS_PER_MONTH. What was used is read from the TokenUsage
ledger, which deleting conversations, messages or a whole history does not touch. A reply being
written when the budget runs out finishes: budgets are checked before the engine is called.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q, Sum
from django.utils import timezone

from conversations.models import Budget, FirstTokenTimes, TokenUsage
from conversations.services.errors import BudgetExhausted
from conversations.types import User


@dataclass(frozen=True)
class Allowance:
    """Tokens a day and a month; 0: no limit."""

    per_day: int
    per_month: int

    @property
    def limited(self) -> bool:
        return bool(self.per_day or self.per_month)


@dataclass(frozen=True)
class Spent:
    today: int
    this_month: int


def allowance(user: User) -> Allowance:
    """The budget that applies to `user` (see the module's docstring), in one query."""
    budgets = list(
        Budget.objects.filter(Q(user=user) | Q(group__user=user)).values(
            "user_id", "tokens_per_day", "tokens_per_month"
        )
    )
    return Allowance(
        per_day=_applying(budgets, "tokens_per_day", settings.CHAT_TOKENS_PER_DAY),
        per_month=_applying(budgets, "tokens_per_month", settings.CHAT_TOKENS_PER_MONTH),
    )


def _applying(budgets: Sequence[Mapping[str, Any]], period: str, default: int) -> int:
    own = [b[period] for b in budgets if b["user_id"] is not None and b[period] is not None]
    if own:
        return int(own[0])
    groups = [b[period] for b in budgets if b["user_id"] is None and b[period] is not None]
    if groups:
        return 0 if 0 in groups else int(max(groups))
    return default


def spent(user: User, today: date) -> Spent:
    """Tokens of `user`'s replies and titles today and this month (`today`'s), from the ledger."""
    tokens = F("prompt_tokens") + F("completion_tokens")
    used = TokenUsage.objects.filter(user=user, day__gte=today.replace(day=1)).aggregate(
        today=Sum(tokens, filter=Q(day=today)), this_month=Sum(tokens)
    )
    return Spent(today=used["today"] or 0, this_month=used["this_month"] or 0)


@dataclass(frozen=True)
class Usage:
    """What the account page shows: the budget that applies and what was used of it."""

    allowance: Allowance
    spent: Spent
    time_zone: str


def usage_of(user: User) -> Usage:
    now = timezone.localtime()
    return Usage(allowance(user), spent(user, now.date()), now.tzname() or "")


def check_budget(user: User) -> None:
    """Raise BudgetExhausted if `user` used a whole budget: the day's first (it resets sooner)."""
    allowed = allowance(user)
    if not allowed.limited:
        return
    now = timezone.localtime()
    used = spent(user, now.date())
    if allowed.per_day and used.today >= allowed.per_day:
        tomorrow = now.date() + timedelta(days=1)
        raise _exhausted(f"your {allowed.per_day:,} tokens for today", now, tomorrow)
    if allowed.per_month and used.this_month >= allowed.per_month:
        next_month = (now.date().replace(day=1) + timedelta(days=32)).replace(day=1)
        raise _exhausted(f"your {allowed.per_month:,} tokens for this month", now, next_month)


def _exhausted(what: str, now: datetime, resets_on: date) -> BudgetExhausted:
    resets_at = midnight(resets_on)
    wait = max(1, int((resets_at - now).total_seconds()))
    return BudgetExhausted(
        f"You have used {what}. Your budget resets on {resets_at:%Y-%m-%d at %H:%M} "
        f"{resets_at.tzname()} (in {_duration(wait)}).",
        retry_after=wait,
        resets_at=resets_at,
    )


def midnight(day: date) -> datetime:
    """When `day` begins in TIME_ZONE, where the ledger's days and the budgets' resets are."""
    return timezone.make_aware(datetime.combine(day, time.min))


def _duration(seconds: int) -> str:
    hours, minutes = divmod(seconds // 60, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days} d {hours} h"
    return f"{hours} h {minutes} min" if hours else f"{max(minutes, 1)} min"


def record_usage(
    *,
    user_id: int,
    model_slug: str,
    prompt_tokens: int | None,
    completion_tokens: int | None,
    cancelled: bool = False,
    title: bool = False,
    ttft_ms: float | None = None,
) -> None:
    """Add a reply's (or a title's) tokens to today's row of the ledger, and the reply's time to
    its first token (None: it had none) to today's bucket of the model's."""
    today = timezone.localdate()
    row, _ = TokenUsage.objects.get_or_create(user_id=user_id, day=today, model_slug=model_slug)
    TokenUsage.objects.filter(pk=row.pk).update(
        replies=F("replies") + (0 if title else 1),
        cancelled=F("cancelled") + (1 if cancelled else 0),
        titles=F("titles") + (1 if title else 0),
        prompt_tokens=F("prompt_tokens") + (prompt_tokens or 0),
        completion_tokens=F("completion_tokens") + (completion_tokens or 0),
    )
    if ttft_ms is not None:
        _count_first_token_time(today, model_slug, FirstTokenTimes.bucket_of(ttft_ms))


def _count_first_token_time(day: date, model_slug: str, bucket: int) -> None:
    """One more reply in the bucket: one UPDATE, once the row exists (all but the day's first
    reply of the model at that speed). The row is shared by everyone using the model, so no
    SELECT comes before it."""
    row = FirstTokenTimes.objects.filter(day=day, model_slug=model_slug, bucket=bucket)
    if row.update(replies=F("replies") + 1):
        return
    try:
        with transaction.atomic():  # a savepoint: another reply may make the row meanwhile
            FirstTokenTimes.objects.create(day=day, model_slug=model_slug, bucket=bucket, replies=1)
    except IntegrityError:
        row.update(replies=F("replies") + 1)

"""Filters in what was typed: `name:value` words that narrow a search to some conversations,
read apart from the free text around them.

    project:"Q3 plan" pinned:yes archived:no model:smollm2 after:2026-01-01 before:2026-04-01 zeppelin

- project:<name>: in the project of that name (case-insensitive; quoted when it has spaces);
- pinned:yes|no, archived:yes|no;
- model:<slug>: the conversation's model, the one its next reply uses (the last one it used);
- after:YYYY-MM-DD: last active on that day or later; before:YYYY-MM-DD: before that day (so
  after:2026-03-01 before:2026-03-02 is that one day), in the site's time zone.

Only these names are filters: any other `word:word` ("http://", "note:") is text to look for.
A value that means nothing ("pinned:maybe", "before:yesterday", the same filter twice) is a
FilterError naming the filter and what it takes: the page shows it, the API answers 400.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from datetime import date, datetime, time

from django.db.models import Q
from django.utils import timezone

# What each filter takes, as its error says it.
TAKES = {
    "project": "a project's name",
    "pinned": "yes or no",
    "archived": "yes or no",
    "model": "a model's slug (letters, digits, - and _)",
    "before": "a date as YYYY-MM-DD",
    "after": "a date as YYYY-MM-DD",
}

# A filter is a word of its own (at the start or after a space). A quoted value may hold spaces;
# one whose closing quote is not typed yet runs to the end.
_FILTER = re.compile(rf'(?<!\S)({"|".join(TAKES)}):("[^"]*"?|\S*)', re.IGNORECASE)
_SLUG = re.compile(r"[-a-zA-Z0-9_]{1,50}")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_YES_NO = {"yes": True, "no": False}


class FilterError(ValueError):
    """A filter whose value means nothing; the message names it and says what it takes."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name


@dataclass(frozen=True)
class Filters:
    project: str | None = None
    pinned: bool | None = None
    archived: bool | None = None
    model: str | None = None
    before: date | None = None
    after: date | None = None

    def __bool__(self) -> bool:
        return any(getattr(self, f.name) is not None for f in fields(self))

    def q(self) -> Q:
        """The condition on a Conversation that every filter given holds."""
        condition = Q()
        if self.project is not None:
            condition &= Q(project__name__iexact=self.project)
        if self.pinned is not None:
            condition &= Q(pinned=self.pinned)
        if self.archived is not None:
            condition &= Q(archived=self.archived)
        if self.model is not None:
            condition &= Q(model_slug=self.model)
        if self.before is not None:
            condition &= Q(updated_at__lt=_start_of(self.before))
        if self.after is not None:
            condition &= Q(updated_at__gte=_start_of(self.after))
        return condition


@dataclass(frozen=True)
class Query:
    text: str  # the free text, the filters taken out
    filters: Filters


def parse(typed: str) -> Query:
    """The filters in `typed` and the text left to look for; FilterError for a bad value."""
    values: dict[str, object] = {}
    for match in _FILTER.finditer(typed):
        name = match.group(1).lower()
        if name in values:
            raise FilterError(name, f"“{name}:” is given twice.")
        values[name] = _value(name, match.group(2))
    text = " ".join(_FILTER.sub(" ", typed).split())
    return Query(text=text, filters=Filters(**values))  # type: ignore[arg-type]


def _value(name: str, raw: str) -> object:
    value = raw[1:].removesuffix('"') if raw.startswith('"') else raw
    value = value.strip()
    if not value:
        raise FilterError(name, f"“{name}:” takes {TAKES[name]}.")
    wrong = FilterError(name, f"“{name}:” takes {TAKES[name]}, not “{value}”.")
    if name in ("pinned", "archived"):
        if value.lower() not in _YES_NO:
            raise wrong
        return _YES_NO[value.lower()]
    if name == "model" and not _SLUG.fullmatch(value):
        raise wrong
    if name in ("before", "after"):
        if not _DATE.fullmatch(value):
            raise wrong
        try:
            return date.fromisoformat(value)
        except ValueError:  # 2026-02-30
            raise wrong from None
    return value


def _start_of(day: date) -> datetime:
    """Midnight at the start of `day` in the current time zone (the site's: TIME_ZONE)."""
    return timezone.make_aware(datetime.combine(day, time.min))

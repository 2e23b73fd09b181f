"""Reading filters out of what was typed (conversations.search.filters): the values each takes,
the text left to look for, and the errors that name a filter."""

from __future__ import annotations

from datetime import date

import pytest

from conversations.search.filters import FilterError, Filters, Query, parse


@pytest.mark.parametrize(
    "typed, expected",
    [
        ("zeppelin", Query("zeppelin", Filters())),
        ("model:smollm2", Query("", Filters(model="smollm2"))),
        (
            "before:2026-03-01 zeppelin after:2026-02-01",
            Query("zeppelin", Filters(before=date(2026, 3, 1), after=date(2026, 2, 1))),
        ),
        ("Model:Qwen-7B_chat red  zeppelin", Query("red zeppelin", Filters(model="Qwen-7B_chat"))),
        # Any other name is text, and so is a filter inside a word.
        ("see http://example.com note:x", Query("see http://example.com note:x", Filters())),
        ("premodel:x", Query("premodel:x", Filters())),
        ('"exact phrase" -without', Query('"exact phrase" -without', Filters())),
    ],
)
def test_it_reads_the_filters_apart_from_the_text(typed: str, expected: Query) -> None:
    assert parse(typed) == expected


def test_an_empty_query_has_no_filters() -> None:
    assert parse("") == Query("", Filters())
    assert not parse("zeppelin").filters
    assert parse("model:x").filters


@pytest.mark.parametrize(
    "typed, expected",
    [
        ('project:"Q3 plan" notes', Query("notes", Filters(project="Q3 plan"))),
        ("project:Garden", Query("", Filters(project="Garden"))),
        ('notes project:"Q3 pl', Query("notes", Filters(project="Q3 pl"))),  # still typing
        ("pinned:yes archived:NO", Query("", Filters(pinned=True, archived=False))),
        ("pinned:no", Query("", Filters(pinned=False))),
    ],
)
def test_it_reads_the_organisation_filters(typed: str, expected: Query) -> None:
    assert parse(typed) == expected


@pytest.mark.parametrize(
    "typed, name, message",
    [
        ("before:yesterday", "before", "“before:” takes a date as YYYY-MM-DD, not “yesterday”."),
        ("after:2026-02-30", "after", "“after:” takes a date as YYYY-MM-DD, not “2026-02-30”."),
        ("after:2026-2-3", "after", "“after:” takes a date as YYYY-MM-DD, not “2026-2-3”."),
        ("zeppelin before:", "before", "“before:” takes a date as YYYY-MM-DD."),
        (
            'model:"two words"',
            "model",
            "“model:” takes a model's slug (letters, digits, - and _), not “two words”.",
        ),
        ("model:a model:b", "model", "“model:” is given twice."),
    ],
)
def test_a_value_that_means_nothing_is_an_error_naming_the_filter(
    typed: str, name: str, message: str
) -> None:
    with pytest.raises(FilterError) as raised:
        parse(typed)
    assert raised.value.name == name
    assert str(raised.value) == message


@pytest.mark.parametrize(
    "typed, message",
    [
        ("pinned:maybe", "“pinned:” takes yes or no, not “maybe”."),
        ("archived:true", "“archived:” takes yes or no, not “true”."),
        ('project:""', "“project:” takes a project's name."),
    ],
)
def test_an_organisation_filter_that_means_nothing_is_an_error(typed: str, message: str) -> None:
    with pytest.raises(FilterError, match=message):
        parse(typed)

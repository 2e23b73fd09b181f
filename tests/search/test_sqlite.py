"""The fallback on SQLite (the default for a laptop): a case-insensitive contains query."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from conversations import search
from conversations.models import Conversation
from tests.search.chats import chat, message, on_postgresql

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(on_postgresql, reason="PostgreSQL searches with full text"),
]


def ranked(user: Any, text: str) -> list[str]:
    return [hit.conversation.title for hit in search.search(user, text).hits]


def test_any_part_of_a_word_matches(alice: Any) -> None:
    chat(alice, "Bread", "My SOURDOUGH starter")
    assert ranked(alice, "dough") == ["Bread"]
    assert search.filter_matching(Conversation.objects.visible_to(alice), "ourdo").count() == 1


def test_every_word_must_be_in_the_title_or_in_one_message(alice: Any) -> None:
    chat(alice, "Bread", "sourdough starter", "flour and water")
    chat(alice, "Sourdough", "the starter")
    assert ranked(alice, "sourdough starter") == ["Bread"]
    assert ranked(alice, "sourdough water") == []
    assert ranked(alice, '"sourdough" -starter') == ["Bread"]  # quotes and minus are dropped


def test_titles_that_match_come_first_then_the_most_recently_active(alice: Any) -> None:
    chat(alice, "Older text", "about zeppelins")
    chat(alice, "Zeppelins", "hello")
    chat(alice, "Newer text", "more zeppelins")
    assert ranked(alice, "zeppelin") == ["Zeppelins", "Newer text", "Older text"]


def test_the_snippet_is_cut_around_the_first_match_and_escaped(alice: Any) -> None:
    text = "word " * 100 + "<b>the zeppelin</b> & " + "more " * 100
    conversation = chat(alice, "Long", text)
    [hit] = search.search(alice, "ZEPPELIN").hits
    assert hit.message_id == message(conversation, text).pk
    assert "&lt;b&gt;the <mark>zeppelin</mark>&lt;/b&gt; &amp; more" in hit.snippet
    assert hit.snippet.startswith("…word") and hit.snippet.endswith("…")
    assert len(hit.snippet) < 300


def test_the_newest_matching_message_is_the_one_shown(alice: Any) -> None:
    conversation = chat(alice, "Airships", "a zeppelin", "another zeppelin", "no")
    [hit] = search.search(alice, "zeppelin").hits
    assert hit.message_id == message(conversation, "another zeppelin").pk


def test_the_migration_adds_nothing_here(db: Any) -> None:
    with connection.cursor() as cursor:
        columns = [
            c.name
            for c in connection.introspection.get_table_description(cursor, "conversations_message")
        ]
        indexes = connection.introspection.get_constraints(cursor, "conversations_message")
    assert "search_vector" not in columns
    assert "conversations_message_search" not in indexes

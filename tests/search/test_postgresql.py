"""Full-text search on PostgreSQL: ranking, prefixes, web-search syntax, the stored vector
kept by the database, and queries the GIN indexes can answer."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from conversations import search
from conversations.models import Conversation, Message
from conversations.search import postgresql
from conversations.search.filters import parse
from tests.search.chats import chat, message, on_postgresql
from tests.support.history import make_history

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(not on_postgresql, reason="full-text search is PostgreSQL's"),
]


def ranked(user: Any, text: str) -> list[str]:
    return [hit.conversation.title for hit in search.search(user, text).hits]


def test_a_title_match_ranks_above_a_match_in_the_text(alice: Any) -> None:
    chat(alice, "Notes", "a long talk that mentions zeppelin once among other words")
    chat(alice, "Zeppelin", "hello")
    assert ranked(alice, "zeppelin") == ["Zeppelin", "Notes"]


def test_more_matches_rank_higher(alice: Any) -> None:
    once = chat(alice, "once", "zeppelin")
    chat(alice, "thrice", "zeppelin", "zeppelin again", "a zeppelin, and a zeppelin")
    once.save()  # the most recent: ranking, not recency, puts the other first
    assert ranked(alice, "zeppelin") == ["thrice", "once"]


def test_the_best_matching_message_is_the_one_shown(alice: Any) -> None:
    conversation = chat(alice, "Airships", "a zeppelin", "zeppelin after zeppelin", "no")
    [hit] = search.search(alice, "zeppelin").hits
    assert hit.message_id == message(conversation, "zeppelin after zeppelin").pk
    assert str(hit.snippet) == "<mark>zeppelin</mark> after <mark>zeppelin</mark>"


def test_a_title_is_shown_whole_with_its_matches_marked(alice: Any) -> None:
    title = "word " * 30 + "zeppelin & <b>"
    chat(alice, title, "hello")
    [hit] = search.search(alice, "zeppelin").hits
    assert hit.message_id is None
    assert str(hit.title) == "word " * 30 + "<mark>zeppelin</mark> &amp; &lt;b&gt;"


def test_ties_go_to_the_most_recently_active(alice: Any) -> None:
    first = chat(alice, "first", "zeppelin")
    chat(alice, "second", "zeppelin")
    first.save()
    assert ranked(alice, "zeppelin") == ["first", "second"]


@pytest.mark.parametrize(
    "typed, expected",
    [
        ("kube", ["Clusters"]),  # the word being typed is a prefix
        ("kube ", ["Clusters"]),
        ("deploying kube", ["Clusters"]),
        ("kube deploying", []),  # only the last word is a prefix
        ('"we deploy"', ["Deploys"]),  # a phrase
        ('"deploy we"', []),
        ("deploy -kubernetes", ["Deploys"]),  # without
        ("kubernetes or nomad", ["Clusters", "Deploys"]),
        ("Ünïcode", ["Clusters"]),  # folded to lower case, accents kept
        ("!!", []),
        ("zeppelin\x00", []),
    ],
)
def test_it_reads_what_is_typed_as_web_search(alice: Any, typed: str, expected: list[str]) -> None:
    chat(alice, "Clusters", "deploying kubernetes with ünïcode")
    chat(alice, "Deploys", "we deploy to nomad")
    assert sorted(ranked(alice, typed)) == expected


def test_the_text_inside_html_tags_is_found_and_shown(alice: Any) -> None:
    chat(alice, "Page", 'Use <script src="app.js">start()</script> in <head>')
    for word in ("script", "start", "head"):
        [hit] = search.search(alice, word).hits
        assert f"<mark>{word}</mark>" in hit.snippet
        assert "<script" not in hit.snippet and "&lt;" in hit.snippet


def test_a_reply_is_found_once_it_has_settled(alice: Any) -> None:
    """The stored vector is NULL while a reply streams: flushes neither parse it nor touch the
    index (they stay HOT updates); it is computed once, when the reply settles."""
    conversation = chat(alice, "Live", "Tell me about airships")
    reply = Message.objects.create(
        conversation=conversation, role="assistant", status=Message.Status.STREAMING
    )
    moved = Message.objects.transition(
        reply.pk, from_=Message.ACTIVE_STATUSES, to=None, content="The zeppelin"
    )
    assert moved == 1
    assert ranked(alice, "zeppelin") == []
    assert vector_of(reply) is None

    Message.objects.transition(
        reply.pk, from_=Message.ACTIVE_STATUSES, to=Message.Status.COMPLETE, content="The zeppelin"
    )
    assert ranked(alice, "zeppelin") == ["Live"]
    assert vector_of(reply) == "'the':1 'zeppelin':2"


def vector_of(message: Message) -> Any:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT search_vector::text FROM conversations_message WHERE id = %s", [message.pk]
        )
        return cursor.fetchone()[0]


def test_only_the_newest_matches_are_ranked_for_a_common_word(
    alice: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postgresql, "WINDOW", 2)
    for name in ("oldest", "older", "newer", "newest"):
        chat(alice, name, "zeppelin")
    assert ranked(alice, "zeppelin") == ["newest", "newer"]
    # The API's filter is exact: it counts every match.
    assert search.filter_matching(Conversation.objects.visible_to(alice), "zeppelin").count() == 4


def test_a_phrase_ranks_fewer_of_its_newest_matches(
    alice: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postgresql, "WINDOW", 3)
    monkeypatch.setattr(postgresql, "PHRASE_WINDOW", 1)
    for name in ("oldest", "newer", "newest"):
        chat(alice, name, "the red zeppelin")
    assert ranked(alice, "red zeppelin") == ["newest", "newer", "oldest"]
    assert ranked(alice, '"red zeppelin"') == ["newest"]


@pytest.mark.parametrize("recent_first", [True, False])
def test_both_ways_of_finding_matches_agree(alice: Any, recent_first: bool) -> None:
    for i in range(5):
        chat(alice, f"chat {i}", "zeppelin " * (i + 1))
    sql, params = search.ranked_sql(alice.pk, "zeppelin", 0, recent_first=recent_first)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        found = [row[0] for row in cursor.fetchall()]
    by_title = dict(Conversation.objects.values_list("pk", "title"))
    assert [by_title[pk] for pk in found] == [f"chat {i}" for i in reversed(range(5))]


@pytest.fixture
def many(alice: Any) -> None:
    """3,000 messages: a word in all of them, and one in one (with its statistics)."""
    make_history(alice, 300, 10)
    chat(alice, "Airships", "zeppelin")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE conversations_message")
        cursor.execute("ANALYZE conversations_conversation")


# The plain index on a conversation's owner: with a test's few hundred conversations, reading
# all of one owner's through it and filtering their titles costs about what the title's GIN
# index does, and which one PostgreSQL picks then follows the statistics the tests before left.
OWNER_INDEXES = """
    SELECT indexname FROM pg_indexes
    WHERE tablename = 'conversations_conversation' AND indexdef LIKE '%%(owner_id)'
"""


def plan(sql: str, params: Any) -> str:
    # A test's tables are small enough to read whole, which PostgreSQL prefers to any index,
    # and one owner's conversations few enough to read through the owner's index: forbidding
    # both (the index dropped in the test's transaction, which rolls back) shows that the
    # search indexes can answer the query. (bench/search.py shows the planner choosing them
    # at 200,000 messages, with every index there.)
    with connection.cursor() as cursor:
        cursor.execute(OWNER_INDEXES)
        for (index,) in cursor.fetchall():
            cursor.execute(f'DROP INDEX "{index}"')
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("EXPLAIN " + sql, params)
        return "\n".join(row[0] for row in cursor.fetchall())


def test_the_page_query_reads_the_gin_indexes(alice: Any, many: None) -> None:
    with connection.cursor() as cursor:
        assert not search.recent_first(cursor, "zeppel", owner_id=alice.pk)
    explained = plan(*search.ranked_sql(alice.pk, "zeppel", 0, recent_first=False))
    assert "Bitmap Index Scan on conversations_message_search" in explained
    assert "Bitmap Index Scan on conversations_conversation_title_search" in explained


def test_a_word_in_most_messages_walks_the_newest_first(alice: Any, many: None) -> None:
    with connection.cursor() as cursor:
        assert search.recent_first(cursor, "message", owner_id=alice.pk)
    explained = plan(*search.ranked_sql(alice.pk, "message", 0, recent_first=True))
    assert "Index Scan using conversations_message_search_newest" in explained


def test_the_api_filter_reads_the_gin_indexes(alice: Any, many: None) -> None:
    explained = plan(
        *search.filter_matching(
            Conversation.objects.visible_to(alice), "zeppel"
        ).query.sql_with_params()
    )
    # The whole plan when it fails: which one PostgreSQL picks for tables this small depends on
    # their statistics and physical size, which the tests run before this one leave behind.
    assert "Bitmap Index Scan on conversations_message_search" in explained, explained
    assert "Bitmap Index Scan on conversations_conversation_title_search" in explained, explained


# Filters held by most conversations (here every one) leave the search on the GIN indexes. One
# held by few may rather be read first, and their messages through the conversation's index,
# which is cheaper: the planner chooses by its estimates either way.
def test_filters_keep_the_page_query_on_the_gin_indexes(alice: Any, many: None) -> None:
    filters = parse("after:2020-01-01 before:2100-01-01").filters
    explained = plan(*search.ranked_sql(alice.pk, "zeppel", 0, recent_first=False, filters=filters))
    assert "Bitmap Index Scan on conversations_message_search" in explained, explained
    assert "Bitmap Index Scan on conversations_conversation_title_search" in explained, explained


def test_filters_keep_the_api_filter_on_the_gin_indexes(alice: Any, many: None) -> None:
    mine = Conversation.objects.visible_to(alice)
    query = search.filter_matching(mine, "zeppel after:2020-01-01 before:2100-01-01").query
    explained = plan(*query.sql_with_params())
    assert "Bitmap Index Scan on conversations_message_search" in explained, explained
    assert "Bitmap Index Scan on conversations_conversation_title_search" in explained, explained

"""One user's search reads that user's messages and titles only: another user's matches, however
many, are not read (migration 0012's indexes start with the owner), so they do not slow it down."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from conversations import search
from conversations.models import Conversation, Message
from conversations.search import postgresql
from tests.search.chats import chat, on_postgresql
from tests.support.history import make_history

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(not on_postgresql, reason="full-text search is PostgreSQL's"),
]


@pytest.fixture
def crowded(users: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Any:
    """alice has three conversations that mention zeppelin; bob, 2,000 messages that all do,
    written after hers and far more than the WINDOW. Returns alice."""
    monkeypatch.setattr(postgresql, "WINDOW", 20)
    alice, bob = users["alice"], users["bob"]
    for name in ("first", "second", "third"):
        chat(alice, f"Airships {name}", "the zeppelin", "a reply")
    chat(alice, "Boats", "a ferry", "a reply")
    make_history(bob, 200, 10, " about the zeppelin", title="zeppelin")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE conversations_message")
        cursor.execute("ANALYZE conversations_conversation")
    return alice


def explained(sql: str, params: Any) -> dict[str, Any]:
    # Forbidding sequential scans shows the plan of big tables (see test_postgresql.plan).
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("EXPLAIN (FORMAT JSON) " + sql, params)
        plan: dict[str, Any] = cursor.fetchone()[0][0]["Plan"]
        return plan


# How a scan may reach the rows of each table: by their owner, or from rows found by owner
# (the messages of a conversation, a conversation by its key).
BY_OWNER = {
    "conversations_message": ("search_owner_id =", "conversation_id ="),
    "conversations_conversation": ("owner_id =", "id ="),
}


def reads_beyond_the_owner(node: dict[str, Any]) -> list[str]:
    """The scans of `node`'s plan that read messages or conversations other than by owner."""
    wrong = []
    table = node.get("Relation Name")
    if table in BY_OWNER:
        conditions = " ".join(_index_conditions(node))
        if not any(allowed in conditions for allowed in BY_OWNER[table]):
            scan = f"{node['Node Type']} on {table} using {node.get('Index Name', 'no index')}"
            wrong.append(f"{scan} ({conditions or 'no index condition'})")
    for child in node.get("Plans", []):
        if node["Node Type"] != "Bitmap Heap Scan":  # its index scans were read above
            wrong += reads_beyond_the_owner(child)
    return wrong


def _index_conditions(node: dict[str, Any]) -> list[str]:
    found = [node["Index Cond"]] if "Index Cond" in node else []
    for child in node.get("Plans", []):
        found += _index_conditions(child)
    return found


def titles(user: Any, text: str) -> list[str]:
    return [hit.conversation.title for hit in search.search(user, text).hits]


def test_finding_11_a_query_reads_only_the_callers_messages_however_many_others_match(
    crowded: Any,
) -> None:
    alice = crowded
    expected = ["Airships third", "Airships second", "Airships first"]
    assert titles(alice, "zeppelin") == expected  # complete, though bob's 2,000 are newer
    for recent_first in (False, True):
        sql, params = search.ranked_sql(alice.pk, "zeppelin", 0, recent_first=recent_first)
        assert reads_beyond_the_owner(explained(sql, params)) == []
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            assert len(cursor.fetchall()) == 3


def test_finding_11_a_common_word_walks_the_owners_messages_not_everyones_newer_ones(
    users: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Half the messages alice's, the newer half bob's, a word in all of them: walking the
    newest first, by the id alone, the planner took the primary key (owners spread evenly over
    the ids, it reckoned) and read bob's messages before it reached any of alice's."""
    monkeypatch.setattr(postgresql, "WINDOW", 20)
    alice, bob = users["alice"], users["bob"]
    make_history(alice, 150, 10, " the zeppelin", title="alice")
    make_history(bob, 150, 10, " the zeppelin", title="bob")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE conversations_message")
        cursor.execute("ANALYZE conversations_conversation")
    sql, params = search.ranked_sql(alice.pk, "zeppelin", 0, recent_first=True)
    assert reads_beyond_the_owner(explained(sql, params)) == []
    assert {hit.conversation.owner_id for hit in search.search(alice, "zeppelin").hits} == {
        alice.pk
    }


def test_finding_11_the_api_filter_reads_only_the_callers_messages(crowded: Any) -> None:
    alice = crowded
    matching = search.filter_matching(Conversation.objects.visible_to(alice), "zeppelin")
    assert matching.count() == 3
    assert reads_beyond_the_owner(explained(*matching.query.sql_with_params())) == []


def held_owners(conversation: Conversation) -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT search_owner_id FROM conversations_message WHERE conversation_id = %s",
            [conversation.pk],
        )
        return [owner for (owner,) in cursor.fetchall()]


def test_each_message_holds_its_conversations_owner(users: dict[str, Any]) -> None:
    alice, bob = users["alice"], users["bob"]
    conversation = chat(alice, "Airships", "the zeppelin", "a reply")
    assert held_owners(conversation) == [alice.pk, alice.pk]

    Conversation.objects.filter(pk=conversation.pk).update(owner=bob)
    assert held_owners(conversation) == [bob.pk, bob.pk]
    assert [hit.conversation for hit in search.search(bob, "zeppelin").hits] == [conversation]
    assert search.search(alice, "zeppelin").hits == []

    # A message written before its conversation (the foreign key is checked at commit).
    later = Conversation(owner=alice, title="Later")
    Message.objects.create(conversation_id=later.pk, role="user", content="a zeppelin")
    later.save()
    assert held_owners(later) == [alice.pk]

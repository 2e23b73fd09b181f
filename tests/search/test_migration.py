"""Migrations 0010 and 0012 apply and reverse on either database (they act on PostgreSQL only)."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from conversations.models import Message
from tests.search.chats import chat, on_postgresql

BEFORE = ("conversations", "0009_conversation_origin")
PER_OWNER = importlib.import_module("conversations.migrations.0012_search_per_owner")
BEFORE_PER_OWNER = PER_OWNER.Migration.dependencies[0]


def search_objects() -> set[str]:
    """The search columns, indexes and triggers the database has."""
    with connection.cursor() as cursor:
        columns = connection.introspection.get_table_description(cursor, "conversations_message")
        found = {c.name for c in columns} & {"search_vector", "search_owner_id"}
        for table in ("conversations_message", "conversations_conversation"):
            found |= {
                name
                for name in connection.introspection.get_constraints(cursor, table)
                if "_search" in name
            }
        if on_postgresql:
            cursor.execute("SELECT tgname FROM pg_trigger WHERE tgname LIKE '%%_search_owner%%'")
            found |= {name for (name,) in cursor.fetchall()}
    return found


def index_columns() -> dict[str, Any]:
    """What each search index is made of, and the expression of the messages' vector."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE indexname LIKE '%%_search%%'"
        )
        found: dict[str, Any] = {
            name: definition.split(" USING ")[1] for name, definition in cursor.fetchall()
        }
        cursor.execute(
            "SELECT generation_expression FROM information_schema.columns"
            " WHERE table_name = 'conversations_message' AND column_name = 'search_vector'"
        )
        found["search_vector"] = cursor.fetchone()[0]
    return found


OWN_OBJECTS = {
    "search_owner_id",
    "conversations_message_search_newest",
    "conversations_message_search_owner",
    "conversations_conversation_search_owner_insert",
    "conversations_conversation_search_owner_update",
}


@pytest.fixture
def executor(transactional_db: Any) -> Iterator[MigrationExecutor]:
    executor = MigrationExecutor(connection)
    yield executor
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())  # the schema the other tests expect


def test_it_applies_and_reverses(executor: MigrationExecutor) -> None:
    of_0010 = {
        "search_vector",
        "conversations_message_search",
        "conversations_conversation_title_search",
    }
    expected = of_0010 | OWN_OBJECTS if on_postgresql else set()
    assert search_objects() == expected

    executor.migrate([BEFORE_PER_OWNER])
    assert search_objects() == (of_0010 if on_postgresql else set())

    executor.loader.build_graph()
    executor.migrate([BEFORE])
    assert search_objects() == set()

    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
    assert search_objects() == expected


@pytest.mark.skipif(not on_postgresql, reason="the migration acts on PostgreSQL only")
def test_0012_indexes_a_prefix_by_owner_and_reverses_to_0010s_indexes(
    executor: MigrationExecutor, alice: Any
) -> None:
    conversation = chat(alice, "Airships", "the zeppelin")
    assert index_columns() == {
        "conversations_message_search": "gin (search_owner_id, search_vector)",
        "conversations_message_search_newest": "btree (search_owner_id, ((- id)))",  # 0013
        "conversations_conversation_title_search": "gin (owner_id, to_tsvector('simple'::regconfig,"
        " translate((title)::text, '<>'::text, '  '::text)))",
        "search_vector": "\nCASE\n    WHEN ((status)::text = ANY ((ARRAY['pending'::character"
        " varying, 'streaming'::character varying])::text[])) THEN NULL::tsvector\n    ELSE"
        " to_tsvector('simple'::regconfig, translate(\"left\"(content, 65536), '<>'::text,"
        " '  '::text))\nEND",
    }
    assert owners() == {alice.pk}

    executor.migrate([BEFORE_PER_OWNER])
    columns = index_columns()
    assert columns["conversations_message_search"] == "gin (search_vector)"
    assert columns["conversations_conversation_title_search"].startswith("gin (to_tsvector(")
    assert "left" not in columns["search_vector"]

    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
    assert owners() == {alice.pk}  # filled in for the messages written before
    assert Message.objects.filter(conversation=conversation).count() == 1


def owners() -> set[int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT search_owner_id FROM conversations_message")
        return {owner for (owner,) in cursor.fetchall()}

"""Migration 0010 applies and reverses on either database (it acts on PostgreSQL only)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.search.chats import on_postgresql

BEFORE = ("conversations", "0009_conversation_origin")


def search_objects() -> set[str]:
    """The search column and indexes the database has."""
    with connection.cursor() as cursor:
        columns = connection.introspection.get_table_description(cursor, "conversations_message")
        found = {c.name for c in columns} & {"search_vector"}
        for table in ("conversations_message", "conversations_conversation"):
            found |= {
                name
                for name in connection.introspection.get_constraints(cursor, table)
                if name.endswith("_search")
            }
    return found


@pytest.fixture
def executor(transactional_db: Any) -> Iterator[MigrationExecutor]:
    executor = MigrationExecutor(connection)
    yield executor
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())  # the schema the other tests expect


def test_it_applies_and_reverses(executor: MigrationExecutor) -> None:
    expected = (
        {
            "search_vector",
            "conversations_message_search",
            "conversations_conversation_title_search",
        }
        if on_postgresql
        else set()
    )
    assert search_objects() == expected

    executor.migrate([BEFORE])
    assert search_objects() == set()

    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
    assert search_objects() == expected

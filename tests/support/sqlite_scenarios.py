"""Sends racing other writers on a real SQLite file, run in a fresh interpreter.

The suite's own database is PostgreSQL or pytest-django's in-memory SQLite, where neither WAL nor
file locks apply, so tests/ops/test_sqlite.py runs `python -m tests.support.sqlite_scenarios NAME`
with DATABASE_URL naming a temporary file. Each scenario prints one JSON object.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import django

HOLD_S = 0.3


def setup() -> tuple[Any, Any]:
    """Migrate the file; return alice (who sends) and bob (who writes at the same time)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatsite.settings")
    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    call_command("migrate", verbosity=0)
    User = get_user_model()
    return (
        User.objects.create_user("alice", "alice@example.com", "alice-password"),
        User.objects.create_user("bob", "bob@example.com", "bob-password"),
    )


def database_path() -> str:
    from django.db import connection

    return str(connection.settings_dict["NAME"])


def send(owner: Any, content: str, conversation: Any = None) -> str:
    """One send (on a new conversation of the owner's unless given): "ok", or why it failed."""
    from conversations.generation.replies import Send, Turn, reply_create
    from conversations.services.conversations import conversation_create

    try:
        conversation = conversation or conversation_create(owner=owner)
        reply_create(Send(conversation=conversation, turn=Turn(content=content)))
    except Exception as exc:  # the scenario reports every failure
        return f"{type(exc).__name__}: {exc}"
    return "ok"


@contextmanager
def lock_taken_when_a_transaction_begins(bob: Any) -> Iterator[dict[str, Any]]:
    """When Django begins a transaction, another connection takes the write lock for HOLD_S.

    That is a login saving its session, or a rename, arriving just as a send begins.
    """
    from django.db import connection

    from conversations.models import Conversation

    other = Conversation.objects.create(owner=bob, title="Bob's chat")
    holder = sqlite3.connect(database_path(), timeout=0, check_same_thread=False)
    holder.isolation_level = None
    report: dict[str, Any] = {"held": False}

    def release() -> None:
        time.sleep(HOLD_S)
        holder.execute("COMMIT")

    def wrapper(execute: Callable[..., Any], sql: str, *args: Any) -> Any:
        if sql.startswith("BEGIN") and not report["held"]:
            holder.execute("BEGIN IMMEDIATE")
            holder.execute(
                "UPDATE conversations_conversation SET title = 'renamed' WHERE id = ?",
                (other.pk.hex,),  # Django keeps UUIDs in SQLite as hex
            )
            report["held"] = True
            threading.Thread(target=release).start()
        return execute(sql, *args)

    with connection.execute_wrapper(wrapper):
        yield report


def lock_held() -> dict[str, Any]:
    alice, bob = setup()
    from conversations.services.conversations import conversation_create

    conversation = conversation_create(owner=alice)
    with lock_taken_when_a_transaction_begins(bob) as report:
        started = time.monotonic()
        report["send"] = send(alice, "Hello while bob writes", conversation)
        report["waited_s"] = time.monotonic() - started
    return report


def concurrent_writes(sends: int = 30, senders: int = 3) -> dict[str, Any]:
    """`sends` sends from `senders` threads while bob renames and creates conversations."""
    alice, bob = setup()
    from django.db import connection

    from conversations.services.conversations import conversation_create, conversation_rename

    connection.close()
    results: list[str] = []
    writes = {"renames": 0, "creates": 0, "writes_failed": 0}
    done = threading.Event()

    def sender(number: int) -> None:
        for i in range(sends // senders):
            results.append(send(alice, f"Message {number}-{i}"))
        connection.close()

    def writer() -> None:
        conversation = conversation_create(owner=bob, title="Bob's chat")
        while not done.is_set():
            try:
                conversation_rename(conversation=conversation, title=f"Rename {writes['renames']}")
                writes["renames"] += 1
                conversation_create(owner=bob)
                writes["creates"] += 1
            except Exception:  # counted: the sends are what the test asserts on
                writes["writes_failed"] += 1
        connection.close()

    background = threading.Thread(target=writer)
    background.start()
    threads = [threading.Thread(target=sender, args=(n,)) for n in range(senders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    done.set()
    background.join()
    failures = [result for result in results if result != "ok"]
    return {"sends": len(results), "failed": len(failures), "errors": failures[:3], **writes}


def journal_mode() -> dict[str, Any]:
    setup()
    raw = sqlite3.connect(database_path())
    try:
        (mode,) = raw.execute("PRAGMA journal_mode").fetchone()
    finally:
        raw.close()
    return {"journal_mode": mode}


SCENARIOS: dict[str, Callable[[], dict[str, Any]]] = {
    "lock_held": lock_held,
    "concurrent_writes": concurrent_writes,
    "journal_mode": journal_mode,
}

if __name__ == "__main__":
    print(json.dumps(SCENARIOS[sys.argv[1]]()))

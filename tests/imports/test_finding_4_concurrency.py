"""Finding 4 of issue 23: one import per user at a time, and a cap on imports a process runs at
once (CHAT_IMPORTS_AT_ONCE); a refused import says when to try again, and a slot is given back
however its import ends."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.cache import cache
from django.core.management import CommandError, call_command
from django.db import connections
from django.test import Client

from conversations.imports import importer
from conversations.imports.slots import ImportBusy, import_slot
from conversations.imports.writing import ConversationWriter
from conversations.models import Conversation
from tests.imports.helpers import api_client, imported, upload
from tests.imports.sources import as_json, claude_conversation

pytestmark = pytest.mark.django_db

WAIT_S = 30  # a bound on each wait, so that a broken test fails rather than hangs


class Held:
    """Imports run in threads that stop inside the import (once it has started reading) until
    released; imports in the test's own thread run as usual."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        self.release = threading.Event()
        self.threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []
        original: Callable[..., None] = importer._Importer.run
        held = self

        def run(self: Any, values: Any, reader: Any) -> None:
            if threading.current_thread() is threading.main_thread():
                original(self, values, reader)
                return
            held.started.release()
            assert held.release.wait(WAIT_S), "never released"

        # Nor does a held import write its audit row: on SQLite, a write from another thread
        # waits on the test's own transaction ("database table is locked").
        audited: Callable[..., None] = importer._audited

        def audited_in_main_thread(importer_run: Any) -> None:
            if threading.current_thread() is threading.main_thread():
                audited(importer_run)

        self.started = threading.Semaphore(0)
        monkeypatch.setattr(importer._Importer, "run", run)
        monkeypatch.setattr(importer, "_audited", audited_in_main_thread)

    def start(self, owner: Any) -> None:
        """Start an import of `owner`'s in a thread, and return once it is inside the import."""

        def target() -> None:
            try:
                data = as_json([claude_conversation("held")])
                imported(owner, data, keep_partial=True)
            except BaseException as exc:
                self.errors.append(exc)
                self.started.release()  # wakes start(), which reports it
            finally:
                connections.close_all()

        thread = threading.Thread(target=target)
        thread.start()
        self.threads.append(thread)
        assert self.started.acquire(timeout=WAIT_S), "the held import never started"
        assert not self.errors, self.errors

    def finish(self) -> None:
        self.release.set()
        for thread in self.threads:
            thread.join(WAIT_S)
        assert not self.errors, self.errors


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[Held]:
    holding = Held(monkeypatch)
    try:
        yield holding
    finally:
        holding.release.set()
        for thread in holding.threads:
            thread.join(WAIT_S)


def a_file(name: str) -> bytes:
    return as_json([claude_conversation(name)])


def test_finding_4_a_second_import_of_the_same_user_while_one_runs_is_refused(
    alice: Any, bob: Any, held: Held, tmp_path: Path
) -> None:
    alice_api = api_client(alice)
    held.start(alice)

    over = alice_api.post("/api/imports/", {"file": upload(a_file("1"), "c.json")})
    assert over.status_code == 429, over.content
    assert over.json()["code"] == "import_in_progress"
    assert 1 <= int(over["Retry-After"]) <= 120
    assert "still running" in over.json()["detail"]

    page = Client()
    page.force_login(alice)
    on_page = page.post("/settings/import/", {"file": upload(a_file("2"), "c.json")})
    assert on_page.status_code == 429 and "Retry-After" in on_page
    assert "Try again in" in on_page.content.decode()

    path = tmp_path / "c.json"
    path.write_bytes(a_file("3"))
    with pytest.raises(CommandError, match="still running"):
        call_command("import_history", "alice", str(path), stdout=StringIO())

    assert not Conversation.objects.filter(owner=alice).exists(), "nothing of them was read"
    others = api_client(bob).post("/api/imports/", {"file": upload(a_file("4"), "c.json")})
    assert others.status_code == 201, "another user's import is not held up"

    held.finish()
    after = alice_api.post("/api/imports/", {"file": upload(a_file("5"), "c.json")})
    assert after.status_code == 201, "once it has finished, the next one runs"


def test_finding_4_a_refused_import_spends_none_of_the_hours_imports(
    settings: Any, alice: Any, held: Held
) -> None:
    settings.CHAT_IMPORTS_PER_HOUR = 1
    held.start(alice)
    alice_api = api_client(alice)
    for _ in range(3):
        over = alice_api.post("/api/imports/", {"file": upload(a_file("1"), "c.json")})
        assert over.json()["code"] == "import_in_progress"
    held.finish()

    after = alice_api.post("/api/imports/", {"file": upload(a_file("2"), "c.json")})
    assert after.status_code == 201, after.content


def test_finding_4_the_process_wide_cap_refuses_a_third_concurrent_import(
    settings: Any, alice: Any, bob: Any, charlie: Any, held: Held
) -> None:
    settings.CHAT_IMPORTS_AT_ONCE = 2
    held.start(alice)
    held.start(bob)

    over = api_client(charlie).post("/api/imports/", {"file": upload(a_file("1"), "c.json")})
    assert over.status_code == 429, over.content
    assert over.json()["code"] == "imports_busy"
    assert 1 <= int(over["Retry-After"]) <= 120

    page = Client()
    page.force_login(charlie)
    on_page = page.post("/settings/import/", {"file": upload(a_file("2"), "c.json")})
    assert on_page.status_code == 429 and "Try again in" in on_page.content.decode()
    assert not Conversation.objects.filter(owner=charlie).exists()

    held.finish()
    after = api_client(charlie).post("/api/imports/", {"file": upload(a_file("3"), "c.json")})
    assert after.status_code == 201, after.content


def test_finding_4_the_slot_is_released_when_an_import_fails(
    settings: Any, alice: Any, bob: Any, held: Held, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.CHAT_IMPORTS_AT_ONCE = 1
    held.start(alice)
    busy = api_client(bob).post("/api/imports/", {"file": upload(a_file("1"), "c.json")})
    assert busy.status_code == 429, "the one slot is taken"
    held.finish()

    refused = api_client(alice).post("/api/imports/", {"file": upload(b"not json", "c.json")})
    assert refused.status_code == 400
    assert refused.json()["code"] == "not_json"

    def crash(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("the database went away")

    monkeypatch.setattr(ConversationWriter, "write", crash)
    with pytest.raises(RuntimeError):
        imported(alice, a_file("2"))
    monkeypatch.undo()

    for user in (alice, bob):
        after = api_client(user).post("/api/imports/", {"file": upload(a_file("3"), "c.json")})
        assert after.status_code == 201, after.content


def test_finding_4_an_import_whose_lease_lapsed_leaves_a_newer_imports_slot_alone(
    alice: Any,
) -> None:
    """An import slower than the lease: another import of the user's took the slot meanwhile;
    the first one's end must not free it."""
    with import_slot(user_id=alice.pk) as first:
        cache.delete(first.key)  # the first lease lapsed
        with import_slot(user_id=alice.pk):
            pass  # the second import ran; now a third takes the slot
        third = import_slot(user_id=alice.pk)
        third.__enter__()
    try:
        # The first's end left the third's slot taken.
        with pytest.raises(ImportBusy), import_slot(user_id=alice.pk):
            pass
    finally:
        third.__exit__(None, None, None)

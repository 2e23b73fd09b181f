"""How many imports run at once: one per user across every process, and CHAT_IMPORTS_AT_ONCE in
this process.

An import holds many times its largest conversation's JSON in memory while it parses and writes
it, so imports running together add up: the per-user rule keeps one account from running its
hour's imports side by side, and the process-wide cap bounds what every user's together cost one
process. An import refused by either is refused at once (ImportBusy), with when to try again,
before any of its file is read.

The user's slot is a lease in Django's cache (`cache.add`, SET NX in Redis, so two processes
never both take it), renewed while the import runs and freed when it ends however it ends; a
process killed mid-import holds it only until the lease lapses. The process's cap is a counter in
this process's memory: it bounds this process's memory, which is what it is for.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.core.cache import cache

from conversations.imports.source import ImportRefused

LEASE_S = 300
# Renewed well inside the lease, so one slow conversation does not let the lease lapse.
RENEW_EVERY_S = LEASE_S / 5
# When a refused import is told to try again: imports last seconds to minutes, so a guess.
RETRY_AFTER_S = 30

IN_PROGRESS = "import_in_progress"
BUSY = "imports_busy"


class ImportBusy(ImportRefused):
    """Another import of the user's is running (IN_PROGRESS), or this process runs as many as
    CHAT_IMPORTS_AT_ONCE (BUSY); `retry_after` seconds on, the user may try again."""

    def __init__(self, code: str, message: str, retry_after: int = RETRY_AFTER_S):
        super().__init__(code, f"{message} Try again in {retry_after} seconds.")
        self.retry_after = retry_after


class Lease:
    """The user's slot, held while the import runs; `renew` it as the import goes on. Its value
    is a token of this import's own, so that it frees only its own slot."""

    def __init__(self, key: str):
        self.key = key
        self.token = secrets.token_hex(8)
        self.renewed = time.monotonic()

    def take(self) -> bool:
        return bool(cache.add(self.key, self.token, timeout=LEASE_S))

    def renew(self) -> None:
        if time.monotonic() - self.renewed >= RENEW_EVERY_S:
            cache.touch(self.key, LEASE_S)
            self.renewed = time.monotonic()

    def end(self) -> None:
        # A lease that lapsed (a conversation slower than LEASE_S) may be a newer import's now:
        # that one's is left alone. (Read then delete: a lapse in between is not covered.)
        if cache.get(self.key) == self.token:
            cache.delete(self.key)


class _Running:
    """The imports this process runs now, under CHAT_IMPORTS_AT_ONCE (read at each start, so a
    changed setting applies to the next import)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.count = 0

    def take(self) -> bool:
        with self.lock:
            if self.count >= settings.CHAT_IMPORTS_AT_ONCE:
                return False
            self.count += 1
            return True

    def give_back(self) -> None:
        with self.lock:
            self.count -= 1


_running = _Running()


@contextmanager
def import_slot(*, user_id: int) -> Iterator[Lease]:
    """Hold the user's import slot and one of this process's for the block; ImportBusy when
    either is taken. Both are given back when the block ends, by an error too."""
    lease = Lease(f"chatsite:import-running:{user_id}")
    if not lease.take():
        raise ImportBusy(IN_PROGRESS, "Another import of yours is still running.")
    try:
        if not _running.take():
            raise ImportBusy(BUSY, "The server is busy with other imports.")
        try:
            yield lease
        finally:
            _running.give_back()
    finally:
        lease.end()

"""Daphne's graceful shutdown waits for the replies being written to be saved.

On SIGTERM (or SIGINT) daphne stops Twisted's reactor, which first waits for what its "before
shutdown" triggers return: daphne's own one cancels the connections' applications. This one
cancels every generation of the process and waits, bounded, for each to save its text (see
conversations.generation.shutdown); without it the loop stopped under them and each reply lost
what it had written since its last flush.
"""

from __future__ import annotations

import asyncio
import sys

from conversations.generation.shutdown import generations_interrupt


def install() -> None:
    """Under daphne only: another server (uvicorn) has no reactor, and must not get one here."""
    if "twisted.internet.reactor" not in sys.modules:
        return
    from twisted.internet import defer, reactor

    def save_replies() -> defer.Deferred[int]:
        return defer.Deferred.fromFuture(asyncio.ensure_future(generations_interrupt()))

    # zope interfaces declare methods without self: mypy reads "phase" as self.
    reactor.addSystemEventTrigger("before", "shutdown", save_replies)  # type: ignore[arg-type]

"""The process's keep-alive round: one trip to the database for every reply the process writes.

Every CHAT_FLUSH_INTERVAL_S, one transaction on the database thread writes the partial text and
heartbeat of each running generation, then each acts on what its row said (a Stop recorded by
another process, a row settled by someone else) and pings its tabs. One trip and one commit a
round, however many replies stream: per-reply flushes queued on Channels' single database thread
ahead of every send and Stop, and on SQLite each one was an fsync'd commit of its own.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from channels.db import database_sync_to_async
from django.conf import settings

from conversations.generation import rows

logger = logging.getLogger("chatsite.generation")


class Member(Protocol):
    """What the round needs of each reply in it (a generation's Control)."""

    @property
    def message_id(self) -> int: ...

    def flush_request(self) -> rows.Flush: ...

    async def after_flush(self, flush: rows.Flush, result: rows.FlushResult | None) -> None:
        """Act on what the row said (None: the write failed)."""
        ...


class KeepAlive:
    def __init__(self) -> None:
        self.members: dict[int, Member] = {}  # by reply id
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._failing = False  # the last round's write failed: one warning per outage
        self._refused: set[int] = set()  # replies whose own write failed in the last round

    def add(self, member: Member) -> None:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a new event loop (tests run one each): start afresh
            self.members, self._task, self._loop = {}, None, loop
        self.members[member.message_id] = member
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._run(), name="keep-alive")

    def discard(self, member: Member) -> None:
        if self.members.get(member.message_id) is member:
            del self.members[member.message_id]

    async def _run(self) -> None:
        while self.members:
            await asyncio.sleep(settings.CHAT_FLUSH_INTERVAL_S)
            # In id order: two processes' transactions never take the same rows in two orders.
            controls = [self.members[key] for key in sorted(self.members)]
            if not controls:
                return
            flushes = [control.flush_request() for control in controls]
            outcomes = await self._write(flushes)
            acted = await asyncio.gather(
                *(c.after_flush(f, r) for c, f, r in zip(controls, flushes, outcomes, strict=True)),
                return_exceptions=True,
            )
            # One reply's failure must not end the round for the others, nor pass unseen.
            for control, outcome in zip(controls, acted, strict=True):
                if isinstance(outcome, Exception):
                    logger.error(
                        "keep-alive failed for reply %s", control.message_id, exc_info=outcome
                    )

    async def _write(self, flushes: list[rows.Flush]) -> list[rows.FlushResult | None]:
        """What each row said, or None where its write failed (nothing is marked flushed: the
        next round writes its text again). A reply whose own row refuses its write fails alone
        (see rows.flush_all)."""
        try:
            results = await database_sync_to_async(rows.flush_all)(flushes)
        except Exception as exc:
            if not self._failing:
                logger.warning("flush failed for %s replies: %r", len(flushes), exc)
            self._failing = True
            return [None] * len(flushes)
        if self._failing:
            logger.info("flushes work again")
        self._failing = False
        refused = {
            flush.message_id: result
            for flush, result in zip(flushes, results, strict=True)
            if isinstance(result, Exception)
        }
        # One warning per reply, not one a round: a row that refused a write refuses the next.
        for message_id in refused.keys() - self._refused:
            logger.warning("flush failed for reply %s: %r", message_id, refused[message_id])
        self._refused = set(refused)
        return [None if isinstance(result, Exception) else result for result in results]


# One per process: every generation of the process takes part in the same round.
keep_alive = KeepAlive()

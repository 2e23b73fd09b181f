"""The reply's text on its way to the tabs: deltas in offset order, snapshots on request.

The first token goes out at once; later ones wait for the coalescing interval (see Coalescer).
A snapshot for one tab never holds back the deltas of the others: it is taken at once and
waits for room in that tab's channel on its own. A stop sends nothing more: the reply keeps the
text its tabs and readers were sent (see Coalescer.stop).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from django.conf import settings

from conversations.events import broadcast
from conversations.events.protocol import Delta, Event, Snapshot
from conversations.generation.background import spawn
from conversations.generation.coalescer import Coalescer

logger = logging.getLogger("chatsite.generation")


class Feed:
    def __init__(self, message_id: int, send: Callable[[Event], Awaitable[None]], shown: str = ""):
        self.message_id = message_id
        self.text = Coalescer(
            settings.CHAT_COALESCE_MS / 1000, shown, max_chars=settings.CHAT_MAX_REPLY_CHARS
        )
        self._send = send
        self._lock = asyncio.Lock()  # deltas go out in offset order
        self._timer: asyncio.Task[None] | None = None
        self._snapshots: set[asyncio.Task[Any]] = set()  # strong references, as for any task
        # When the engine's first token came: the row says "streaming" from the next keep-alive
        # round (one write for all replies, see keepalive).
        self.first_token_at: datetime | None = None
        self._reader_had: int | None = None  # the least text a reader that left had received
        self._final = False  # the reply's end is decided: a stop now changes nothing

    async def add(self, delta: str) -> None:
        if not self.text.add(delta):
            return  # after a stop or past the limit: not kept, so not sent
        if self.first_token_at is None:
            self.first_token_at = datetime.now(UTC)
        if self._timer is not None:
            return  # a frame is already scheduled; it will carry this delta too
        delay = self.text.frame_due_in(time.monotonic())
        if delay <= 0:
            await self.send_now()
        else:
            self._timer = asyncio.create_task(self._send_later(delay))

    async def send_now(self) -> None:
        """Send what the tabs have not been sent yet."""
        self._cancel_timer()
        async with self._lock:
            frame = self.text.take_frame(time.monotonic())
            if frame is not None:
                await self._send(Delta(self.message_id, frame.offset, frame.text))

    def stop(self) -> None:
        """The reply was stopped: what the tabs were sent is the reply (see Coalescer.stop)."""
        if self._final:
            return
        self._cancel_timer()
        self.text.stop(received=self._reader_had)

    def reader_left(self, unread: Iterable[Event | None]) -> None:
        """A reader in this process stopped listening, leaving `unread` in its queue: it has the
        text up to the first delta it did not take, and a stop keeps no more than that."""
        if self._final:
            return
        had = next((e.offset for e in unread if isinstance(e, Delta)), self.text.sent)
        self._reader_had = had if self._reader_had is None else min(self._reader_had, had)
        if self.text.closed:
            self.text.stop(received=self._reader_had)

    async def finish(self) -> None:
        """The reply's end is decided: send the tabs what they have not been sent yet."""
        self._final = True
        await self.send_now()

    def _cancel_timer(self) -> None:
        if self._timer is not None and self._timer is not asyncio.current_task():
            self._timer.cancel()
            self._timer = None

    async def _send_later(self, delay: float) -> None:
        await asyncio.sleep(delay)
        self._timer = None
        await self.send_now()

    def send_snapshot(self, reply_channel: str) -> None:
        """Send one tab the text so far, in a task of its own: a full channel makes it wait, and
        nothing else (Stops above all) may wait behind it."""
        spawn(self._snapshot_to(reply_channel), keep=self._snapshots)

    async def _snapshot_to(self, reply_channel: str) -> None:
        # Taken without waiting for anything: deltas keep flowing to every other tab while this
        # one's full channel drains, and the tab orders what it gets by offset.
        snapshot = Snapshot(self.message_id, self.text.snapshot())
        try:
            await broadcast.to_channel(
                reply_channel, snapshot, attempts=broadcast.CHANNEL_FULL_ATTEMPTS
            )
        except Exception as exc:
            logger.warning("snapshot failed message=%s: %r", self.message_id, exc)

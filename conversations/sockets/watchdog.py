"""Keeps a tab from losing a reply when group messages are lost.

A full channel drops messages, and Redis can restart, so a tab may miss a reply's deltas, its
finish, or the answer to its request for a snapshot. The watchdog asks again for a snapshot that
was not answered, and looks up in the database a reply the tab has heard nothing about for a
while: its process may have died (the lookup settles it), or it finished unheard.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from channels.db import database_sync_to_async
from django.db import DatabaseError

from conversations.events.payloads import MessagePayload
from conversations.generation import recovery, replies
from conversations.models import Conversation
from conversations.ops import metrics
from conversations.sockets.tabs import ASK_AGAIN_S, TabState

logger = logging.getLogger("chatsite.socket")


class Watchdog:
    """Follows the replies `tab` shows while it shows any; `finish` shows a settled reply's end
    (the consumer's rendering), as if its finish had been heard."""

    def __init__(
        self,
        *,
        conversation: Conversation,
        tab: TabState,
        reply_channel: str,
        finish: Callable[[int, MessagePayload], Awaitable[None]],
    ) -> None:
        self.conversation = conversation
        self.tab = tab
        self.reply_channel = reply_channel
        self._finish = finish
        self._task: asyncio.Task[None] | None = None
        self._gapped: set[int] = set()  # replies whose lost frames this socket has reported

    def watch(self) -> None:
        """Follow the tab's replies (again): a reply started, or a snapshot was asked for."""
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._settle_silent_replies())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def lost_track(self, message_id: int, *, reason: str, offset: int) -> None:
        """The tab lost track of a reply (see tabs.AskSnapshot): ask for its text so far."""
        if reason == "gap" and message_id not in self._gapped:
            # Once per reply: a layer dropping frames drops many, and each gap is repaired.
            self._gapped.add(message_id)
            metrics.stream_gap()
            logger.warning(
                "frames of message %s lost on their way to a tab (first at offset %s); "
                "resynchronizing it",
                message_id,
                offset,
            )
        await self.request_snapshot(message_id)

    async def ask_snapshot(self, message_id: int) -> None:
        """Show the reply afresh from its text so far (a tab that joined it mid-reply)."""
        self.tab.resync(message_id, time.monotonic())
        await self.request_snapshot(message_id)

    async def request_snapshot(self, message_id: int) -> None:
        self.watch()
        try:
            await replies.reply_sync(
                conversation=self.conversation,
                message_id=message_id,
                reply_channel=self.reply_channel,
            )
        except Exception as exc:  # the watchdog asks again
            logger.warning("snapshot request failed: %r", exc)

    async def _settle_silent_replies(self) -> None:
        while self.tab.following:
            await asyncio.sleep(min(self.tab.quiet_s / 2, ASK_AGAIN_S / 2))
            for message_id in self.tab.unanswered(time.monotonic()):
                await self.request_snapshot(message_id)
            for message_id in self.tab.silent(time.monotonic()):
                try:
                    state = await database_sync_to_async(recovery.reply_state)(
                        conversation=self.conversation, message_id=message_id
                    )
                except DatabaseError as exc:  # the database is away: keep waiting, ask later
                    logger.warning("could not look up reply %s: %r", message_id, exc)
                    continue
                if state.active:
                    await self.ask_snapshot(message_id)  # still running somewhere: ask again
                elif state.message is not None:
                    await self._finish(message_id, state.message)
                else:
                    self.tab.finished(message_id)  # deleted meanwhile: stop following it

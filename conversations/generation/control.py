"""What keeps a running generation in touch: its channel in the group, its keep-alive.

- The listener takes the events of the conversation's generation group: Cancel (stop), Sync
  (send one tab the text so far) and Pong (a tab is still watching). The tabs' events, the
  generation's own frames among them, go to another group and never reach it.
- The keep-alive (the process's round, see keepalive) writes the partial text and heartbeat
  every CHAT_FLUSH_INTERVAL_S; after it the generation picks up a Stop recorded in the row (its
  group message may have been lost), notices a row settled by someone else, pings the tabs, and
  stops a reply nobody has watched for the grace period.
"""

from __future__ import annotations

import asyncio
import logging
import time
from contextlib import suppress

from django.conf import settings

from conversations.events import broadcast, protocol
from conversations.generation import rows
from conversations.generation.feed import Feed
from conversations.generation.keepalive import keep_alive
from conversations.generation.outbox import Outbox
from conversations.generation.plans import ReplyPlan
from conversations.generation.stopping import Stopping

logger = logging.getLogger("chatsite.generation")

DISCONNECTED = "disconnect"  # cancelled_by when the grace period ran out


class Control:
    """A generation's ties to the group and the keep-alive round. It sees the reply's text
    (`feed`), its stop (`stopping`) and its events' way out (`outbox`), never the generation."""

    def __init__(self, plan: ReplyPlan, *, feed: Feed, stopping: Stopping, outbox: Outbox):
        self.message_id = plan.message_id
        self._group = plan.group
        self._request_id = plan.request_id
        self._feed = feed
        self._stopping = stopping
        self._outbox = outbox
        self.channel = ""
        self.last_viewer_seen = time.monotonic()
        self.flushed = 0  # characters of the reply written to the row
        self.marked_streaming = False  # the row says "streaming" (written at a flush)
        self._listener: asyncio.Task[None] | None = None

    async def join(self) -> None:
        layer = broadcast.layer()
        self.channel = await layer.new_channel()
        await self._join_group()
        self._listener = asyncio.create_task(self._listen())
        keep_alive.add(self)

    def stop(self) -> None:
        keep_alive.discard(self)
        if self._listener is not None:
            self._listener.cancel()

    @property
    def group(self) -> str:
        return broadcast.generation_group(self._group)

    async def leave(self) -> None:
        with suppress(Exception):
            await broadcast.layer().group_discard(self.group, self.channel)

    async def _join_group(self) -> None:
        try:
            await broadcast.layer().group_add(self.group, self.channel)
        except Exception as exc:
            # Generating and saving go on; Stops still arrive through the row.
            logger.warning("group add failed request_id=%s: %r", self._request_id, exc)

    async def _listen(self) -> None:
        mine = self.message_id
        while True:
            try:
                message = await broadcast.layer().receive(self.channel)
            except Exception as exc:
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    # stop() cut the receive short, and channels-redis turned the cancellation
                    # into an error: listening is over (retrying would never end).
                    return
                # Redis went away: keep generating and saving; listen again once it is back, and
                # join the group again, since a restarted Redis has forgotten its members.
                logger.warning(
                    "channel layer receive failed request_id=%s: %r", self._request_id, exc
                )
                await asyncio.sleep(0.5)
                await self._join_group()
                continue
            try:
                event = protocol.parse(message)
            except (KeyError, TypeError):  # not ours (another version of chatsite, mid-deploy)
                logger.warning("ignored an unknown group message: %r", message.get("type"))
                continue
            if event.message_id not in (None, mine):
                continue
            if isinstance(event, protocol.Cancel):
                stop = rows.RecordedStop(rows.unix_time(event.requested_at), event.cancelled_by)
                self._stopping.request(stop)
            elif isinstance(event, protocol.Sync):
                self._feed.send_snapshot(event.reply_channel)
            elif isinstance(event, protocol.Pong):
                self.last_viewer_seen = time.monotonic()

    def flush_request(self) -> rows.Flush:
        """This reply's part of the process's keep-alive round (see keepalive): the text the tabs
        were sent, not the frame held back, which a Stop may still drop."""
        text = self._feed.text
        return rows.Flush(
            message_id=self.message_id,
            content=text.snapshot() if text.sent != self.flushed else None,
            look_for_stop=self._stopping.stop is None,
            length=text.sent,
            first_token_at=None if self.marked_streaming else self._feed.first_token_at,
        )

    async def after_flush(self, flush: rows.Flush, result: rows.FlushResult | None) -> None:
        """Act on what the row said (None: the write failed), ping the tabs, mind the grace."""
        if result is not None:
            self.flushed = flush.length
            self.marked_streaming |= flush.first_token_at is not None
            if not result.active:
                self._stopping.row_lost()
            elif result.stop is not None:
                self._stopping.request(result.stop)
        ping = protocol.Ping(message_id=self.message_id, reply_channel=self.channel)
        await self._outbox.send(ping)
        if self._outbox.listeners:  # a reader in this process (an API call) watches it
            self.last_viewer_seen = time.monotonic()
        grace = settings.CHAT_DISCONNECT_GRACE_S
        if time.monotonic() - self.last_viewer_seen > grace:
            logger.info("no viewer for %ss request_id=%s", grace, self._request_id)
            self._stopping.request(rows.RecordedStop(rows.unix_time(time.time()), DISCONNECTED))

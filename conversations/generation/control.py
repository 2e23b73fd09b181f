"""What keeps a running generation in touch: its channel in the group, the keep-alive loop.

- The listener takes the group's events meant for the generation: Cancel (stop), Sync (send
  one tab the text so far) and Pong (a tab is still watching); it ignores the rest, including
  the generation's own events, which every member of the group receives.
- The keep-alive writes the partial text and heartbeat every CHAT_FLUSH_INTERVAL_S, picks up a
  Stop recorded in the row (its group message may have been lost), notices a row settled by
  someone else, pings the tabs, and stops a reply nobody has watched for the grace period.
"""

from __future__ import annotations

import asyncio
import logging
import time
from contextlib import suppress
from typing import TYPE_CHECKING

from channels.db import database_sync_to_async
from django.conf import settings

from conversations import broadcast, protocol
from conversations.generation import rows

if TYPE_CHECKING:
    from conversations.generation.runner import Generation

logger = logging.getLogger("chatsite.generation")

DISCONNECTED = "disconnect"  # cancelled_by when the grace period ran out


class Control:
    def __init__(self, generation: Generation):
        self.generation = generation
        self.channel = ""
        self.last_viewer_seen = time.monotonic()
        self.flushed = 0  # characters of the reply written to the row
        self._tasks: list[asyncio.Task[None]] = []

    async def join(self) -> None:
        layer = broadcast.layer()
        self.channel = await layer.new_channel()
        await self._join_group()
        self._tasks = [asyncio.create_task(self._listen()), asyncio.create_task(self._keep_alive())]

    def stop(self) -> None:
        for task in self._tasks:
            task.cancel()

    async def leave(self) -> None:
        with suppress(Exception):
            await broadcast.layer().group_discard(self.generation.plan.group, self.channel)

    async def _join_group(self) -> None:
        try:
            await broadcast.layer().group_add(self.generation.plan.group, self.channel)
        except Exception as exc:
            # Generating and saving go on; Stops still arrive through the row.
            logger.warning("group add failed request_id=%s: %r", self._request_id, exc)

    @property
    def _request_id(self) -> str:
        return self.generation.plan.request_id

    async def _listen(self) -> None:
        mine = self.generation.plan.message_id
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
                await self.generation.request_stop(stop)
            elif isinstance(event, protocol.Sync):
                # In a task of its own: a full channel makes it wait, and cancels must not.
                self.generation.spawn(self.generation.feed.snapshot_to(event.reply_channel))
            elif isinstance(event, protocol.Pong):
                self.last_viewer_seen = time.monotonic()

    async def _keep_alive(self) -> None:
        generation = self.generation
        interval = settings.CHAT_FLUSH_INTERVAL_S
        grace = settings.CHAT_DISCONNECT_GRACE_S
        while True:
            await asyncio.sleep(interval)
            await self._flush()
            await generation.send(
                protocol.Ping(message_id=generation.plan.message_id, reply_channel=self.channel)
            )
            if time.monotonic() - self.last_viewer_seen > grace:
                logger.info("no viewer for %ss request_id=%s", grace, self._request_id)
                await generation.request_stop(
                    rows.RecordedStop(rows.unix_time(time.time()), DISCONNECTED)
                )

    async def _flush(self) -> None:
        generation = self.generation
        length = generation.feed.text.length
        content = generation.feed.text.text if length != self.flushed else None
        try:
            result = await database_sync_to_async(rows.flush)(
                generation.plan.message_id, content, look_for_stop=generation.stop is None
            )
        except Exception as exc:
            # Not marked flushed: the next round writes the text again, new tokens or not.
            logger.warning("flush failed request_id=%s: %r", self._request_id, exc)
            return
        self.flushed = length
        if not result.active:
            generation.row_lost()
        elif result.stop is not None:
            await generation.request_stop(result.stop)

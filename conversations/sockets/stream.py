"""What one tab shows of its conversation's branch and the replies streaming in it.

Each group event about a reply goes through the tab's TabState (tabs.py), which says what to
show; that is rendered (renderers.py) and sent. The tab's Watchdog (watchdog.py) asks again for
what the group lost.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from channels.db import database_sync_to_async
from django.conf import settings

from conversations.events import broadcast, protocol
from conversations.events.payloads import MessagePayload, message_payload
from conversations.generation import recovery
from conversations.models import Conversation
from conversations.services import branches
from conversations.sockets.renderers import Frames, Renderer
from conversations.sockets.tabs import Append, AskSnapshot, Replace, TabState
from conversations.sockets.watchdog import Watchdog

logger = logging.getLogger("chatsite.socket")


class TabStream:
    """Shows one tab the branch and the replies of `conversation`: `send` takes the frames each
    event is rendered to (none: nothing to show), and snapshots asked for arrive at
    `reply_channel`, the tab's."""

    def __init__(
        self,
        conversation: Conversation,
        renderer: Renderer,
        send: Callable[[Frames], Awaitable[None]],
        reply_channel: str,
    ) -> None:
        self.conversation = conversation
        self.renderer = renderer
        self._send = send
        # A silent reply is looked up after three missed flushes (its process may have died).
        self.tab = TabState(quiet_s=max(2.0, 3 * settings.CHAT_FLUSH_INTERVAL_S))
        self.watchdog = Watchdog(
            conversation=conversation, tab=self.tab, reply_channel=reply_channel, finish=self.finish
        )

    async def joined(self) -> None:
        """The tab opened: show it the latest reply, asking for its text so far if it runs."""
        latest = await database_sync_to_async(recovery.latest_reply)(conversation=self.conversation)
        if latest is not None and latest.is_active:
            await self.watchdog.ask_snapshot(latest.pk)
        else:
            payload = message_payload(latest) if latest is not None else None
            await self._send(self.renderer.settled(payload))

    async def started(self, event: protocol.Started) -> None:
        # A continued reply starts with the text it goes on from: deltas come after it.
        shown = len(event.message["content"])
        if self.tab.started(event.message_id, time.monotonic(), shown=shown):
            self.watchdog.watch()
            await self._send(self.renderer.started(event))

    async def delta(self, event: protocol.Delta) -> None:
        action = self.tab.delta(event.message_id, event.offset, event.text, time.monotonic())
        if isinstance(action, AskSnapshot):
            await self.watchdog.lost_track(
                event.message_id, reason=action.reason, offset=event.offset
            )
        elif isinstance(action, Append):
            await self._send(self.renderer.delta(event.message_id, action.offset, action.text))

    async def snapshot(self, event: protocol.Snapshot) -> None:
        text = self.tab.snapshot(event.message_id, event.text, time.monotonic())
        if text is not None:
            await self._send(self.renderer.snapshot(event.message_id, text))

    async def finish(self, message_id: int, saved: MessagePayload) -> None:
        """Show the saved reply's end this tab missed, then its final state (once)."""
        tail = self.tab.catch_up(message_id, saved["content"])
        if isinstance(tail, Replace):
            await self._send(self.renderer.snapshot(message_id, tail.text))
        elif tail is not None:
            logger.info("message %s: %s characters shown at the finish", message_id, len(tail.text))
            await self._send(self.renderer.delta(message_id, tail.offset, tail.text))
        if self.tab.finished(message_id):
            await self._send(self.renderer.finished(saved))

    async def branch_changed(self) -> None:
        """Show the branch shown now: another version of a turn was chosen."""
        branch = await database_sync_to_async(branches.branch_payloads)(
            conversation=self.conversation
        )
        await self._send(self.renderer.branch(branch))

    async def ping(self, event: protocol.Ping) -> None:
        """The generation asks whether anyone is watching: this tab is, and answers."""
        self.tab.pinged(event.message_id, time.monotonic())
        try:
            await broadcast.to_channel(event.reply_channel, protocol.Pong(event.message_id))
        except Exception as exc:  # a full or unreachable channel: the next ping tries again
            logger.warning("pong failed: %r", exc)

    async def here(self, reply_channel: str) -> None:
        """Someone would delete this temporary chat if no tab were open on it: this one is."""
        try:
            await broadcast.to_channel(reply_channel, protocol.Here(message_id=None), attempts=5)
        except Exception as exc:
            # Unheard, the chat is deleted under this tab, which then closes as for any deletion.
            logger.warning("here failed: %r", exc)

    def forget(self) -> None:
        """Show nothing more (the socket is closing): events still in flight are dropped."""
        self.tab.forget()

    def stop(self) -> None:
        """The socket closed: stop watching."""
        self.watchdog.stop()

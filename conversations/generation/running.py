"""How callers in this process reach a reply being generated here (see runner.running_here).

The gateway's responses read its events and stop it when their client leaves; the socket's
Stop and Sync reach it without the channel layer when it runs here; tests wait for it. They
all go through RunningReply, never through the generation's parts.
"""

from __future__ import annotations

from typing import Protocol

from conversations.generation.listeners import Listener
from conversations.generation.plans import ReplyPlan
from conversations.generation.rows import RecordedStop


class RunningReply(Protocol):
    @property
    def plan(self) -> ReplyPlan:
        """What its send decided: its conversation, message, request id, model."""
        ...

    def listen(self) -> Listener:
        """A queue of every event the reply sends its tabs, in order, then None once it is over
        (however it ended). Called on the return of reply_start, it misses none."""
        ...

    def stop_listening(self, listener: Listener) -> None:
        """The reader is done: what it has not taken from its queue it never received, and a
        stop after this keeps no more text than it took (a client that left has that much)."""
        ...

    async def request_stop(self, stop: RecordedStop) -> None:
        """Stop it, as a Stop from a tab would (the first Stop counts)."""
        ...

    def snapshot_to(self, reply_channel: str) -> None:
        """Send one tab (a channel) the text so far."""
        ...

    async def finished(self) -> None:
        """Wait until it is over: its final state saved (or given up on) and its tabs told."""
        ...

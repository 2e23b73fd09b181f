"""Readers of a generation's events in its own process: the gateway's HTTP responses.

Tabs hear a reply through the channel layer, which may drop a message (a full channel) and
costs a round trip; a reader in the same process gets every event the generation sends its tabs
(Started, Delta, Finished, Ping), in order and at once, from a queue of its own, then None when
the generation is over, however it ended.
"""

from __future__ import annotations

import asyncio

from conversations.events.protocol import Event

Listener = asyncio.Queue[Event | None]


class Listeners:
    def __init__(self) -> None:
        self._queues: list[Listener] = []

    def __bool__(self) -> bool:
        """Someone in this process reads the reply: it has a viewer (see Control's grace)."""
        return bool(self._queues)

    def add(self) -> Listener:
        """A new reader. To hear every event, add it before the generation's task first runs
        (on the return of Generation.start)."""
        queue: Listener = asyncio.Queue()
        self._queues.append(queue)
        return queue

    def discard(self, queue: Listener) -> None:
        if queue in self._queues:
            self._queues.remove(queue)

    def deliver(self, event: Event) -> None:
        for queue in self._queues:
            queue.put_nowait(event)

    def end(self) -> None:
        """The generation is over: each reader gets None, and is let go."""
        for queue in self._queues:
            queue.put_nowait(None)
        self._queues.clear()

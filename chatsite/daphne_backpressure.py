"""Backpressure for daphne's WebSocket input.

Daphne reads every frame a client sends and queues it for the application, without a bound and
without a setting to give it one. A client sending frames faster than its consumer takes them
grows that queue in the server's memory and keeps the process's one event loop parsing its frames,
which every other user's stream waits behind (in one flood the consumer got a frame only every
0.3-0.7 s, so it could not even close the socket). The consumer's own limits (conversations/sockets/throttle.py, CHAT_SOCKET_QUEUED_FRAMES) cannot
help while the frames wait before it.

This protocol stops reading a socket while its application has INBOUND_FRAMES frames waiting and
reads again once it has taken half of them, as servers with backpressure do: the client's TCP
buffers fill and its sends wait, and the server holds at most one read (64 KiB) more per socket.
"""

from __future__ import annotations

import asyncio
from typing import Any

from daphne.ws_protocol import WebSocketFactory, WebSocketProtocol

# Frames received but not yet taken by the socket's consumer, per socket. The consumer takes
# frames at once (it queues its own database work), so only a flood reaches this.
INBOUND_FRAMES = 64
RECHECK_S = 0.01


class BackpressureWebSocketProtocol(WebSocketProtocol):  # type: ignore[misc]  # daphne is untyped
    reading_paused = False

    def onMessage(self, payload: bytes, isBinary: bool) -> None:
        super().onMessage(payload, isBinary)
        queue: asyncio.Queue[Any] | None = getattr(self, "application_queue", None)
        if queue is not None and not self.reading_paused and queue.qsize() >= INBOUND_FRAMES:
            self.reading_paused = True
            self.transport.pauseProducing()
            # Daphne runs Twisted on the asyncio loop: its timers are the reactor's.
            asyncio.get_running_loop().call_later(RECHECK_S, self._read_again_when_drained, queue)

    def _read_again_when_drained(self, queue: asyncio.Queue[Any]) -> None:
        if self.transport is None or queue.qsize() <= INBOUND_FRAMES // 2:
            self.reading_paused = False
            if self.transport is not None:
                self.transport.resumeProducing()
        else:
            asyncio.get_running_loop().call_later(RECHECK_S, self._read_again_when_drained, queue)


def install() -> None:
    """Make daphne build this protocol for every WebSocket (before it accepts connections)."""
    WebSocketFactory.protocol = BackpressureWebSocketProtocol

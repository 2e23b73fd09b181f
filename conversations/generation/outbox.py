"""Where a generation's events go: its readers in this process first, then the conversation's tabs."""

from __future__ import annotations

import logging

from conversations.events import broadcast
from conversations.events.protocol import Event
from conversations.generation.listeners import Listeners

logger = logging.getLogger("chatsite.generation")


class Outbox:
    def __init__(self, group: str, request_id: str) -> None:
        self.listeners = Listeners()  # readers in this process (the gateway's responses)
        self._group = group
        self._request_id = request_id
        self._layer_down = False  # the last group send failed (Redis away)

    async def send(self, event: Event) -> None:
        self.listeners.deliver(event)  # in this process: first, and never dropped
        # A channel-layer outage must not lose the reply: the row is still written, and tabs
        # that reconnect resynchronize from it and from us. One warning per outage, not per frame.
        try:
            await broadcast.to_group(self._group, event)
        except Exception as exc:
            if not self._layer_down:
                logger.warning("group send failed request_id=%s: %r", self._request_id, exc)
            self._layer_down = True
        else:
            if self._layer_down:
                logger.info("group sends work again request_id=%s", self._request_id)
            self._layer_down = False

"""The only module that puts events on the channel layer (see conversations.protocol).

A reader finds every send across processes here. Failures are the caller's to handle: a
generation logs them and goes on (the row still has the text), a tab asks again later.
"""

from __future__ import annotations

import asyncio

from asgiref.sync import async_to_sync
from channels.exceptions import ChannelFull
from channels.layers import BaseChannelLayer, get_channel_layer

from conversations.protocol import Event

# A tab whose channel is full is often the one that asked for a snapshot: give it time to drain.
CHANNEL_FULL_ATTEMPTS = 20
CHANNEL_FULL_PAUSE_S = 0.05


def layer() -> BaseChannelLayer:
    channel_layer = get_channel_layer()
    assert channel_layer is not None, "CHANNEL_LAYERS is always configured in settings"
    return channel_layer


async def to_group(group: str, event: Event) -> None:
    await layer().group_send(group, event.as_message())


def to_group_from_sync(group: str, event: Event) -> None:
    """For synchronous code (a view): the same send, from outside the event loop."""
    async_to_sync(layer().group_send)(group, event.as_message())


async def to_channel(channel: str, event: Event, *, attempts: int = 1) -> None:
    """Send to one channel; with attempts > 1, wait for room in a full channel that long."""
    message = event.as_message()
    for attempt in range(attempts):
        try:
            await layer().send(channel, message)
            return
        except ChannelFull:
            if attempt == attempts - 1:
                raise
            await asyncio.sleep(CHANNEL_FULL_PAUSE_S)

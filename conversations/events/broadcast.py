"""The only module that puts events on the channel layer (see conversations.events.protocol).

A reader finds every send across processes here. Failures are the caller's to handle: a
generation logs them and goes on (the row still has the text), a tab asks again later.
"""

from __future__ import annotations

import asyncio

from asgiref.sync import async_to_sync
from channels.exceptions import ChannelFull
from channels.layers import BaseChannelLayer, get_channel_layer

from conversations.events.protocol import TO_GENERATION, Event

# A tab whose channel is full is often the one that asked for a snapshot: give it time to drain.
CHANNEL_FULL_ATTEMPTS = 20
CHANNEL_FULL_PAUSE_S = 0.05


def layer() -> BaseChannelLayer:
    channel_layer = get_channel_layer()
    assert channel_layer is not None, "CHANNEL_LAYERS is always configured in settings"
    return channel_layer


def generation_group(group: str) -> str:
    """The group a conversation's running generation joins; its tabs join `group` itself.

    Two groups, so that nobody receives what is not meant for them: every frame of a reply goes
    to the tabs only (not back to the generation that sent it, which would double the layer's
    work per frame and fill the generation's channel until a tab's snapshot request was
    dropped), and Stops, snapshot requests and pongs reach the generation only.
    """
    return f"{group}.generation"


def token_group(token_id: int) -> str:
    """The group of the gateway's calls made with an API token: they hear its revocation."""
    return f"api-token-{token_id}"


def _addressee(group: str, event: Event) -> str:
    return generation_group(group) if isinstance(event, TO_GENERATION) else group


async def to_group(group: str, event: Event) -> None:
    """Send to a conversation's tabs or to its generation, whichever the event is for."""
    await layer().group_send(_addressee(group, event), event.as_message())


def to_group_from_sync(group: str, event: Event) -> None:
    """For synchronous code (a view): the same send, from outside the event loop."""
    async_to_sync(layer().group_send)(_addressee(group, event), event.as_message())


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

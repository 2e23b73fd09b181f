"""Temporary chats go once nobody uses them: their last reply has ended and no tab is open.

Two moments can make a temporary chat unused, and each schedules a sweep here, in the process
where it happens: a tab on it closes (sockets.consumer), and its reply ends (runner). The sweep
waits CHAT_TEMPORARY_GRACE_S (a reload opens a new tab meanwhile), then deletes the chat unless a
reply is being written (its end sweeps again) or a tab answers AnyoneHere (that tab's closing
sweeps again). Tabs may be in any process, so they are asked through the conversation's group,
which every tab joins, rather than counted here; a process killed with its tabs answers nothing.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import uuid
from contextlib import suppress

from channels.db import database_sync_to_async
from django.conf import settings

from conversations.events import broadcast
from conversations.events.protocol import AnyoneHere
from conversations.models import Conversation
from conversations.services.temporary import temporary_delete, temporary_unattended

logger = logging.getLogger("chatsite.conversations")

# How long the tabs have to answer: they answer at once from their own event loop, so this
# covers a busy loop and a round trip through Redis, not a person.
ANSWER_WAIT_S = 2.0

# Strong references to the sweeps waiting: asyncio keeps only weak ones to tasks.
_sweeps: set[asyncio.Task[bool]] = set()


def sweep_later(conversation_id: uuid.UUID) -> None:
    """After the grace period, delete the temporary chat if nothing uses it any more."""
    # In a context of its own, as a generation's: it outlives the socket or reply that asked.
    task = asyncio.create_task(
        sweep(conversation_id, after=settings.CHAT_TEMPORARY_GRACE_S), context=contextvars.Context()
    )
    _sweeps.add(task)
    task.add_done_callback(_sweeps.discard)


async def sweep(conversation_id: uuid.UUID, *, after: float = 0.0) -> bool:
    """Delete the temporary chat, after `after` seconds, if no reply is being written in it and
    no tab is open on it; whether it was deleted."""
    await asyncio.sleep(after)
    try:
        if not await database_sync_to_async(temporary_unattended)(conversation_id=conversation_id):
            return False
        if await anyone_here(Conversation(id=conversation_id).group_name):
            return False
        deleted: bool = await database_sync_to_async(temporary_delete)(
            conversation_id=conversation_id
        )
        return deleted
    except Exception:
        # Kept: `manage.py prune_conversations` deletes what a failed sweep leaves behind.
        logger.exception("could not sweep temporary chat %s", conversation_id)
        return False


async def anyone_here(group: str) -> bool:
    """Whether a tab in the conversation's group answers within ANSWER_WAIT_S. An unreachable
    layer answers yes: a chat is kept rather than deleted under an open tab."""
    layer = broadcast.layer()
    channel = await layer.new_channel()
    await broadcast.to_group(group, AnyoneHere(message_id=None, reply_channel=channel))
    # Waited on beside the receive, not by cancelling it: channels-redis can turn a cancelled
    # receive into an error of its own, which would read as a failure here.
    receiving = asyncio.ensure_future(layer.receive(channel))
    done, _ = await asyncio.wait({receiving}, timeout=ANSWER_WAIT_S)
    if not done:
        receiving.cancel()
        with suppress(asyncio.CancelledError, Exception):
            await receiving
        return False
    if receiving.exception() is not None:
        logger.warning("could not hear the tabs of %s: %r", group, receiving.exception())
    return True

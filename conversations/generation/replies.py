"""The generation service's API: create and start a reply, and cancel one from anywhere."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

from channels.db import database_sync_to_async
from django.conf import settings
from django.db import connections
from django.utils.translation import gettext as _

from conversations.events import broadcast
from conversations.events.protocol import Cancel, Sync
from conversations.generation import rows, sends
from conversations.generation.placement import Turn
from conversations.generation.plans import ReplyPlan
from conversations.generation.resolve import CallSettings
from conversations.generation.runner import Generation, running_here
from conversations.generation.running import RunningReply
from conversations.generation.sends import Send
from conversations.models import Conversation, Message
from conversations.services.errors import NothingToCancel

__all__ = [
    "CallSettings",
    "Send",
    "Turn",
    "finish_sends",
    "reply_cancel",
    "reply_create",
    "reply_start",
    "reply_start_with",
    "reply_stop_now",
    "reply_sync",
]

logger = logging.getLogger("chatsite.generation")

P = ParamSpec("P")
R = TypeVar("R")


def reply_create(send: Send) -> ReplyPlan:
    """Save the user's message (if the turn has one) and a pending reply, or refuse the send.

    In one transaction (see sends.save): with `user_id`, check that `session_key` still signs
    that user in (SessionEnded if not); resolve the model, its engine and the reply's settings
    (see resolve); check the limits; save the messages where they go in the tree. Then plan the
    reply from the committed rows (sends.plan). A socket's send makes one trip to a send
    thread for all of it, since under a crowd of sends each trip waits behind all the others.
    """
    saved = sends.save(send)
    return sends.plan(conversation=send.conversation, saved=saved, call=send.call)


async def reply_start(send: Send) -> RunningReply:
    """Save a send and start streaming its reply in this process (see reply_create)."""
    return await reply_start_with(functools.partial(reply_create, send))


async def reply_start_with(save: Callable[[], ReplyPlan]) -> RunningReply:
    """Save a send with `save` (reply_create, or a caller's transaction around it: the gateway
    saves a new conversation and its history with the send, all or nothing) on a send thread,
    then start streaming its reply in this process. The generation's task has not run yet when
    this returns: a reader that listens to it then hears every event."""
    plan = await _on_a_send_thread(save)
    logger.info("send accepted request_id=%s message=%s", plan.request_id, plan.message_id)
    return Generation.start(plan)


_send_threads: ThreadPoolExecutor | None = None


async def _on_a_send_thread(function: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """`function` on one of CHAT_SEND_THREADS threads; on the database thread if there are none.

    Channels' one database thread runs every flush, history read and lookup of the process: a
    crowd of sends queued there waits for each other's round trips to PostgreSQL, one at a time.
    """
    global _send_threads
    if not settings.CHAT_SEND_THREADS:
        result: R = await database_sync_to_async(function)(*args, **kwargs)
        return result
    if _send_threads is None:
        _send_threads = ThreadPoolExecutor(
            settings.CHAT_SEND_THREADS, thread_name_prefix="chatsite-send"
        )
    call = functools.partial(_with_own_connection, function, *args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(_send_threads, call)


def finish_sends() -> None:
    """Wait for the sends being saved on send threads, and let their threads go (in tests, so
    that no send of one test writes into the next, or holds a connection at the end)."""
    global _send_threads
    if _send_threads is not None:
        _send_threads.shutdown(wait=True)
        _send_threads = None


def _with_own_connection(function: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """Run on a send thread with the thread's own connection, given back to the pool after.

    Not through database_sync_to_async: that runs the function in a copy of the caller's
    context, where Django's connections live, and then closes the thread's own connections,
    which the function never used, so the one it did use stayed open.
    """
    try:
        return function(*args, **kwargs)
    finally:
        connections.close_all()


async def reply_stop_now(
    *, conversation: Conversation, message_id: int, cancelled_by: str
) -> Cancel:
    """Tell the generation writing this reply to stop, before anything is written: straight from
    here when it runs in this process, else through the conversation's group.

    A tab knows the reply it shows being written, so its Stop need not wait for the row's write,
    which waits for the database thread (under load, busy with other replies' flushes). Record
    the Stop afterwards with reply_cancel(already_sent=...).
    """
    stop = Cancel(message_id=message_id, requested_at=time.time(), cancelled_by=cancelled_by)
    generation = running_here(message_id)
    if generation is not None:
        await generation.request_stop(
            rows.RecordedStop(rows.unix_time(stop.requested_at), cancelled_by)
        )
    else:
        await broadcast.to_group(conversation.group_name, stop)
    return stop


async def reply_sync(*, conversation: Conversation, message_id: int, reply_channel: str) -> None:
    """Ask the generation writing this reply to send one tab (`reply_channel`) the text so far:
    straight from here when it runs in this process, so a layer that drops messages (a full
    channel) cannot lose the request, else through the conversation's group."""
    generation = running_here(message_id)
    if generation is not None:
        generation.snapshot_to(reply_channel)
    else:
        sync = Sync(message_id=message_id, reply_channel=reply_channel)
        await broadcast.to_group(conversation.group_name, sync)


async def reply_cancel(
    *, conversation: Conversation, cancelled_by: str, already_sent: Cancel | None = None
) -> None:
    """Ask the conversation's running generation, wherever it runs, to stop.

    The request goes to the conversation's group, which reaches the generation at once, and into
    the reply's row, which the generation reads at every flush: a group message can be lost (a
    full channel, a Redis restart, a generation that has not joined its group yet), the row not.
    `already_sent`: the Stop reply_stop_now sent a moment ago, now only recorded.
    """
    requested_at = already_sent.requested_at if already_sent is not None else time.time()
    try:
        message_id = await database_sync_to_async(_record_stop)(
            conversation, cancelled_by, requested_at
        )
    except NothingToCancel:
        if already_sent is None:
            raise
        return  # the reply has ended since: stopped by that Stop, or just finished
    logger.info("cancel requested message=%s by=%s", message_id, cancelled_by)
    if already_sent is None or already_sent.message_id != message_id:
        stop = Cancel(message_id=message_id, requested_at=requested_at, cancelled_by=cancelled_by)
        await broadcast.to_group(conversation.group_name, stop)


def _record_stop(conversation: Conversation, cancelled_by: str, requested_at: float) -> int:
    active = (
        Message.objects.filter(conversation=conversation)
        .active()
        .values_list("pk", flat=True)
        .first()
    )
    if active is None:
        raise NothingToCancel(_("Nothing is being written right now."))
    rows.record_stop(active, cancelled_by, rows.unix_time(requested_at))
    return active

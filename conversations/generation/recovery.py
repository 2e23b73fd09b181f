"""Replies whose process died mid-stream are marked interrupted, decided by their heartbeat.

A live generation refreshes its row's heartbeat every CHAT_FLUSH_INTERVAL_S. An active row whose
heartbeat is older than CHAT_HEARTBEAT_TIMEOUT_S has nobody writing it any more: its text is what
was last flushed, and the conversation must be usable again.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, connections
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_noop

from conversations.events.payloads import MessagePayload, message_payload
from conversations.models import Conversation, Message
from conversations.services.branches import version_of

logger = logging.getLogger("chatsite.recovery")

# Stored in English (rows.py finds the rows by it), translated where a page shows it.
INTERRUPTED_ERROR = gettext_noop("The server stopped while this reply was being written.")


def stale_heartbeat(now: datetime) -> Q:
    """Active replies matching this have nobody writing them any more."""
    cutoff = now - timedelta(seconds=settings.CHAT_HEARTBEAT_TIMEOUT_S)
    return Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True)


def replies_mark_interrupted(
    *, conversation: Conversation | None = None, owner_id: int | None = None
) -> int:
    """Mark active replies with a stale heartbeat as interrupted; returns how many.

    Narrowed to one conversation, or to all of one owner's (before counting their active replies).
    """
    now = timezone.now()
    stale = Message.objects.filter(stale_heartbeat(now), status__in=Message.ACTIVE_STATUSES)
    if conversation is not None:
        stale = stale.filter(conversation=conversation)
    if owner_id is not None:
        stale = stale.filter(conversation__owner_id=owner_id)
    # Found by a read first: this runs before every send, and there is almost never anything to
    # settle (an UPDATE through the owner's join would be a write, and a subquery, every time).
    found = list(stale.values_list("pk", flat=True))
    if not found:
        return 0
    # Conditional on the stale heartbeat: a generation that is still alive keeps its row.
    count = stale.filter(pk__in=found).transition(
        from_=Message.ACTIVE_STATUSES,
        to=Message.Status.INTERRUPTED,
        finished_at=now,
        heartbeat_at=None,
        error=INTERRUPTED_ERROR,
    )
    if count:
        logger.warning("marked %s reply(s) interrupted (stale heartbeat)", count)
    return count


@dataclass(frozen=True)
class ReplyState:
    """What a tab should show for a reply: still running somewhere, or settled as `message`."""

    active: bool
    message: MessagePayload | None  # None when the reply is gone (its conversation deleted)


def reply_state(*, conversation: Conversation, message_id: int) -> ReplyState:
    """A reply a tab has heard nothing about for a while: settle it if its process died."""
    replies_mark_interrupted(conversation=conversation)
    row = Message.objects.filter(pk=message_id, conversation=conversation).first()
    if row is None:
        return ReplyState(active=False, message=None)
    return ReplyState(active=row.is_active, message=message_payload(row))


def latest_reply(*, conversation: Conversation) -> Message | None:
    """The conversation's newest reply, after settling any whose process died."""
    replies_mark_interrupted(conversation=conversation)
    # Its rating with it: a tab re-renders the reply it opens on, pressed thumbs included.
    latest = (
        conversation.messages.filter(role=Message.Role.ASSISTANT).select_related("feedback").last()
    )
    if latest is not None:
        latest.version = version_of(latest)
    return latest


def mark_interrupted_at_startup() -> None:
    """Run when a server process starts: replies of a process that died are settled now."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        _settle_at_startup()
        return
    # uvicorn's workers import the application inside their event loop, where Django refuses
    # queries: they run on a thread of their own, which start-up waits for.
    thread = threading.Thread(target=_settle_at_startup, name="chatsite-recovery")
    thread.start()
    thread.join()


def _settle_at_startup() -> None:
    try:
        replies_mark_interrupted()
    except DatabaseError as exc:  # not migrated yet, or the database is down: never block start-up
        logger.warning("could not check for interrupted replies at start-up: %s", exc)
    finally:
        if threading.current_thread().name == "chatsite-recovery":
            connections.close_all()

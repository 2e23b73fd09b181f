"""Replies whose process died mid-stream are marked interrupted, decided by their heartbeat.

A live generation refreshes its row's heartbeat every CHAT_FLUSH_INTERVAL_S. An active row whose
heartbeat is older than CHAT_HEARTBEAT_TIMEOUT_S has nobody writing it any more: its text is what
was last flushed, and the conversation must be usable again.
"""

import logging
from datetime import timedelta

from django.conf import settings
from django.db import DatabaseError
from django.db.models import Q
from django.utils import timezone

from conversations.models import Conversation, Message

logger = logging.getLogger("chatsite.recovery")

INTERRUPTED_ERROR = "The server stopped while this reply was being written."


def replies_mark_interrupted(*, conversation: Conversation | None = None) -> int:
    """Mark active replies with a stale heartbeat as interrupted; returns how many."""
    now = timezone.now()
    cutoff = now - timedelta(seconds=settings.CHAT_HEARTBEAT_TIMEOUT_S)
    stale = Message.objects.active().filter(
        Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True)
    )
    if conversation is not None:
        stale = stale.filter(conversation=conversation)
    # Conditional on the stale heartbeat: a generation that is still alive keeps its row.
    count = stale.update(
        status=Message.Status.INTERRUPTED,
        finished_at=now,
        heartbeat_at=None,
        error=INTERRUPTED_ERROR,
    )
    if count:
        logger.warning("marked %s reply(s) interrupted (stale heartbeat)", count)
    return count


def mark_interrupted_at_startup() -> None:
    """Run when a server process starts: replies of a process that died are settled now."""
    try:
        replies_mark_interrupted()
    except DatabaseError as exc:  # not migrated yet, or the database is down: never block start-up
        logger.warning("could not check for interrupted replies at start-up: %s", exc)

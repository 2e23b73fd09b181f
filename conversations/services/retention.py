"""Retention: conversations deleted by age (CHAT_RETENTION_DAYS, `manage.py prune_conversations`).

A conversation is old when its last activity (updated_at) is. Pinned conversations and those in a
project are kept unless asked for: they are someone's choice to keep. Temporary chats a sweep left behind (its process stopped first) go whatever the setting,
once idle for LEFTOVER_TEMPORARY_AFTER: they were meant to be gone already.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from conversations.models import Conversation, ConversationQuerySet
from conversations.services.conversations import conversation_delete

logger = logging.getLogger("chatsite.conversations")

LEFTOVER_TEMPORARY_AFTER = timedelta(days=1)


@dataclass(frozen=True)
class Pruning:
    """What to prune: conversations idle for `days` (None: none by age), and whether pinned
    ones and those in a project go too."""

    days: int | None
    include_pinned: bool = False
    include_projects: bool = False
    now: datetime = field(default_factory=timezone.now)

    def queryset(self) -> ConversationQuerySet:
        leftover = Q(temporary=True, updated_at__lt=self.now - LEFTOVER_TEMPORARY_AFTER)
        if self.days is None:
            return Conversation.objects.filter(leftover)
        old = Q(updated_at__lt=self.now - timedelta(days=self.days))
        if not self.include_pinned:
            old &= ~Q(pinned=True)
        if not self.include_projects:
            old &= Q(project__isnull=True)
        return Conversation.objects.filter(old | leftover)


def conversations_prunable(*, pruning: Pruning) -> ConversationQuerySet:
    """The conversations `pruning` would delete, oldest first."""
    return pruning.queryset().order_by("updated_at", "pk")


def conversations_prune(*, pruning: Pruning) -> int:
    """Delete the conversations `pruning` names, one at a time through conversation_delete (their
    files, their running replies), each in its own transaction; how many went. Their usage
    (a ledger of its own) and audit rows stay."""
    ids = list(conversations_prunable(pruning=pruning).values_list("pk", flat=True))
    deleted = 0
    for conversation_id in ids:
        with transaction.atomic():
            # Read again, locked: it may have had a message (or been deleted) since the list.
            conversation = pruning.queryset().select_for_update().filter(pk=conversation_id).first()
            if conversation is None:
                continue
            conversation_delete(conversation=conversation)
        deleted += 1
        logger.debug("pruned conversation %s", conversation_id)
    logger.info(
        "pruned %d conversations (older than %s days, pinned %s, projects %s)",
        deleted,
        pruning.days if pruning.days is not None else "no",
        "included" if pruning.include_pinned else "kept",
        "included" if pruning.include_projects else "kept",
    )
    return deleted

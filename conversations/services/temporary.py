"""Temporary chats: which may go now, and their deletion (generation.temporary decides when)."""

from __future__ import annotations

import logging
import uuid

from django.db import transaction

from conversations.models import Conversation, Message
from conversations.services.conversations import conversation_delete

logger = logging.getLogger("chatsite.conversations")


def temporary_unattended(*, conversation_id: uuid.UUID) -> bool:
    """Whether this is a temporary chat with no reply being written (a running reply's end asks
    again); False for any other conversation, and for one already gone."""
    return (
        Conversation.objects.filter(pk=conversation_id, temporary=True).exists()
        and not Message.objects.filter(conversation_id=conversation_id).active().exists()
    )


def temporary_delete(*, conversation_id: uuid.UUID) -> bool:
    """Delete the temporary chat if it still has no reply being written; whether it went.

    Through conversation_delete, as a Delete from its menu: its files go with it, and its usage
    (a ledger of its own) and audit rows stay.
    """
    with transaction.atomic():
        # Locked, so that a send committing now (from a tab the caller did not hear) either
        # comes first, and is seen below, or waits and finds the conversation gone.
        conversation = (
            Conversation.objects.select_for_update()
            .filter(pk=conversation_id, temporary=True)
            .first()
        )
        if conversation is None or conversation.messages.active().exists():
            return False
        conversation_delete(conversation=conversation)
    logger.info("temporary chat %s deleted: its last tab left", conversation_id)
    return True

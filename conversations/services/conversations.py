"""Writes on conversations that are not about generating a reply."""

import time
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

from conversations.models import Conversation

MAX_TITLE = 200


def conversation_create(*, owner: Any, title: str = "") -> Conversation:
    return Conversation.objects.create(owner=owner, title=title.strip()[:MAX_TITLE])


def conversation_rename(*, conversation: Conversation, title: str) -> Conversation:
    conversation.title = title.strip()[:MAX_TITLE]
    conversation.title_is_custom = True
    conversation.save(update_fields=["title", "title_is_custom", "updated_at"])
    return conversation


def conversation_delete(*, conversation: Conversation) -> None:
    """Delete a conversation and stop its running reply, so no engine works for a deleted row."""
    group = conversation.group_name
    conversation.delete()
    transaction.on_commit(lambda: _stop_generation(group))


def _stop_generation(group: str) -> None:
    async_to_sync(get_channel_layer().group_send)(
        group,
        {
            "type": "generation.cancel",
            "message_id": None,  # whichever reply is running
            "requested_at": time.time(),
            "cancelled_by": "deleted",
        },
    )

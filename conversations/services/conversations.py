"""Writes on conversations that are not about generating a reply."""

import time

from django.db import transaction

from conversations import broadcast
from conversations.models import Conversation
from conversations.protocol import Cancel, Deleted
from conversations.types import User

MAX_TITLE = 200


def conversation_create(*, owner: User, title: str = "") -> Conversation:
    return Conversation.objects.create(owner=owner, title=title.strip()[:MAX_TITLE])


def conversation_rename(*, conversation: Conversation, title: str) -> Conversation:
    conversation.title = title.strip()[:MAX_TITLE]
    conversation.title_is_custom = True
    conversation.save(update_fields=["title", "title_is_custom", "updated_at"])
    return conversation


def conversation_delete(*, conversation: Conversation) -> None:
    """Delete a conversation and stop its running reply, so no engine works for a deleted row.

    The generation would notice anyway at its next flush (its row is gone); the Stop makes it now.
    """
    group = conversation.group_name
    conversation.delete()
    stop = Cancel(message_id=None, requested_at=time.time(), cancelled_by="deleted")

    def tell_the_group() -> None:
        broadcast.to_group_from_sync(group, stop)
        broadcast.to_group_from_sync(group, Deleted(message_id=None))

    transaction.on_commit(tell_the_group)

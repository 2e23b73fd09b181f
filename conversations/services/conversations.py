"""Writes on conversations that are not about generating a reply."""

from typing import Any

from conversations.models import Conversation

MAX_TITLE = 200


def conversation_create(*, owner: Any, title: str = "") -> Conversation:
    return Conversation.objects.create(owner=owner, title=title.strip()[:MAX_TITLE])


def conversation_rename(*, conversation: Conversation, title: str) -> Conversation:
    conversation.title = title.strip()[:MAX_TITLE]
    conversation.title_is_custom = True
    conversation.save(update_fields=["title", "title_is_custom", "updated_at"])
    return conversation

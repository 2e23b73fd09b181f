"""Conversations for the search tests, written as the page and the API store them."""

from __future__ import annotations

from typing import Any

from django.db import connection

from conversations.models import Conversation, Message

on_postgresql = connection.vendor == "postgresql"


def chat(owner: Any, title: str, *texts: str, **fields: Any) -> Conversation:
    """A conversation of `owner` whose messages say `texts`, a question and a reply in turn,
    each following the one before, the last one shown."""
    conversation = Conversation.objects.create(owner=owner, title=title, **fields)
    previous = None
    for i, text in enumerate(texts):
        previous = Message.objects.create(
            conversation=conversation,
            parent=previous,
            role="user" if i % 2 == 0 else "assistant",
            content=text,
        )
    if previous is not None:
        Conversation.objects.filter(pk=conversation.pk).update(current_leaf=previous)
        conversation.refresh_from_db()
    return conversation


def message(conversation: Conversation, text: str) -> Message:
    return conversation.messages.get(content=text)

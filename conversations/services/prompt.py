"""What the engine is given for a reply: the system prompt, then as much history as fits."""

from __future__ import annotations

import uuid

from django.db.models import Q

from conversations.chat_models import ReplySettings
from conversations.engines.base import ChatMessage, Engine
from conversations.models import Message

# Replies the model actually produced text for are history; failed empty ones are not.
_HISTORY_STATUSES = (
    Message.Status.COMPLETE,
    Message.Status.CANCELLED,
    Message.Status.INTERRUPTED,
    Message.Status.ERROR,
)


def load_history(conversation_id: uuid.UUID, *, before: int) -> list[ChatMessage]:
    """The conversation's messages older than the reply `before` (its own id), oldest first."""
    messages = Message.objects.filter(conversation_id=conversation_id, pk__lt=before).filter(
        Q(role=Message.Role.USER)
        | (Q(role=Message.Role.ASSISTANT, status__in=_HISTORY_STATUSES) & ~Q(content=""))
    )
    return [
        ChatMessage(role=role, content=content)
        for role, content in messages.values_list("role", "content")
    ]


def fit_to_context(
    history: list[ChatMessage], engine: Engine, reply: ReplySettings
) -> list[ChatMessage]:
    """The system prompt and the history, oldest turns dropped first when it would not fit.

    The newest user message is always kept, and room is left for the reply itself. Counting
    tokens may load the engine's tokenizer: call this outside any transaction.
    """
    system = [ChatMessage("system", reply.system_prompt)] if reply.system_prompt else []
    budget = engine.context_tokens - reply.max_tokens
    budget -= sum(engine.count_tokens(m.content) + 4 for m in system)
    kept: list[ChatMessage] = []
    for message in reversed(history):
        cost = engine.count_tokens(message.content) + 4  # a few tokens of chat-template framing
        if kept and cost > budget:
            break
        kept.append(message)
        budget -= cost
    kept.reverse()
    # A reply may not open the prompt on most chat templates; drop a leading assistant turn.
    while len(kept) > 1 and kept[0].role == Message.Role.ASSISTANT:
        kept.pop(0)
    return system + kept

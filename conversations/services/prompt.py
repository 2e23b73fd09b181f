"""What the engine is given for a reply: the system prompt, then as much history as fits."""

from __future__ import annotations

import uuid

from conversations.engines.base import ChatMessage, Engine
from conversations.engines.specs import ReplySettings
from conversations.models import Message
from conversations.services.branches import path_to

# Replies the model actually produced text for are history; failed empty ones are not.
_HISTORY_STATUSES = (
    Message.Status.COMPLETE,
    Message.Status.CANCELLED,
    Message.Status.INTERRUPTED,
    Message.Status.ERROR,
)


def load_history(conversation_id: uuid.UUID, *, leaf: int | None) -> list[ChatMessage]:
    """The branch of the conversation that ends at message `leaf` (a new reply's parent),
    oldest first: the versions the user sees, not the ones they browsed away from."""
    rows = Message.objects.filter(conversation_id=conversation_id).only(
        "id", "parent_id", "role", "content", "status", "created_at"
    )
    branch = path_to(leaf, {message.pk: message for message in rows})
    return [
        ChatMessage(role=message.role, content=message.content)
        for message in branch
        if message.role == Message.Role.USER
        or (message.status in _HISTORY_STATUSES and message.content)
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

"""What the engine is given for a reply: the system prompt, then as much history as fits."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

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
_FRAMING_TOKENS = 4  # what the chat template adds around each message, about

# A message and what its text costs in the engine's context (engine.count_tokens).
_Counted = tuple[ChatMessage, int]


@dataclass(frozen=True)
class Prompt:
    """The messages a reply is generated from, and what their text costs (the reply's
    prompt_tokens, which the engine may correct with its own count)."""

    messages: list[ChatMessage]
    tokens: int


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


def build_prompt(
    *, history: list[ChatMessage], engine: Engine, reply: ReplySettings, prefix: str = ""
) -> Prompt:
    """The prompt of a reply, counted: the system prompt and the history, oldest turns dropped
    first when it would not fit (the newest user message is always kept, and room is left for the
    reply itself), and for a continued reply the text it goes on writing from (`prefix`).

    Counting tokens blocks (a tokenizer, or a request to the model's server): call this off the
    event loop, outside any transaction. Each message is counted once, here, so the stream
    built from it never counts.
    """
    counted = _fitted(history, engine, reply)
    if prefix:  # the model goes on writing the reply it was cut off in
        counted.append((ChatMessage("assistant", prefix), engine.count_tokens(prefix)))
    return Prompt(
        messages=[message for message, _ in counted], tokens=sum(tokens for _, tokens in counted)
    )


def _fitted(history: list[ChatMessage], engine: Engine, reply: ReplySettings) -> list[_Counted]:
    """build_prompt's messages but the prefix, each with its count."""
    system = [ChatMessage("system", reply.system_prompt)] if reply.system_prompt else []
    counted = [(message, engine.count_tokens(message.content)) for message in system]
    budget = engine.context_tokens - reply.max_tokens
    budget -= sum(tokens + _FRAMING_TOKENS for _, tokens in counted)
    kept: list[_Counted] = []
    for message in reversed(history):
        tokens = engine.count_tokens(message.content)
        cost = tokens + _FRAMING_TOKENS
        if kept and cost > budget:
            break
        kept.append((message, tokens))
        budget -= cost
    kept.reverse()
    # A reply may not open the prompt on most chat templates; drop a leading assistant turn.
    while len(kept) > 1 and kept[0][0].role == Message.Role.ASSISTANT:
        kept.pop(0)
    return counted + kept

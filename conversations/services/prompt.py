"""What the engine is given for a reply: the system prompt, then as much history as fits."""

from django.conf import settings
from django.db.models import Q

from conversations.engines.base import ChatMessage, Engine
from conversations.models import Conversation, Message

# Replies the model actually produced text for are history; failed empty ones are not.
_HISTORY_STATUSES = (
    Message.Status.COMPLETE,
    Message.Status.CANCELLED,
    Message.Status.INTERRUPTED,
    Message.Status.ERROR,
)


def build_chat_messages(conversation: Conversation, engine: Engine) -> list[ChatMessage]:
    """The conversation so far, oldest turns dropped first when it would not fit the context.

    The newest user message is always kept, and room is left for the reply itself.
    """
    history = [
        ChatMessage(role=m.role, content=m.content)
        for m in conversation.messages.filter(
            Q(role=Message.Role.USER)
            | (Q(role=Message.Role.ASSISTANT, status__in=_HISTORY_STATUSES) & ~Q(content=""))
        )
    ]
    system = (
        [ChatMessage("system", settings.CHAT_SYSTEM_PROMPT)] if settings.CHAT_SYSTEM_PROMPT else []
    )
    budget = engine.context_tokens - settings.CHAT_MAX_TOKENS
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

"""A conversation with replies to rate: two exchanges linked as a branch, the first reply made
with a system prompt and settings a rating copies."""

from __future__ import annotations

from conversations.models import Conversation, Message
from conversations.services.branches import link_as_a_line
from tests.support.history import add_exchange


def two_replies(conversation: Conversation, *, model_slug: str = "small") -> list[Message]:
    """Two user messages each answered (model_slug, a system prompt, temperature 0.3, 200
    tokens), linked so that each follows the one before, as the chat page writes them."""
    replies = [
        add_exchange(
            conversation,
            prompt,
            model_slug=model_slug,
            system_prompt="Answer briefly.",
            temperature=0.3,
            max_tokens=200,
        )
        for prompt in ("What is a socket?", "And a port?")
    ]
    link_as_a_line(conversation.pk)
    for reply in replies:
        reply.refresh_from_db()
    return replies

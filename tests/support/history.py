"""Conversation histories for the API's tests: one exchange with real metrics, or many rows."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from conversations.models import Conversation, Message


def add_exchange(conversation: Conversation, prompt: str, **reply: Any) -> Message:
    """A user message and the assistant's reply, with the metrics a real generation leaves."""
    Message.objects.create(conversation=conversation, role="user", content=prompt)
    answer = Message.objects.create(
        conversation=conversation,
        role="assistant",
        content=reply.pop("content", f"An answer to {prompt}"),
        engine="scripted",
        model="scripted-1",
        request_id=f"req-{prompt[:20]}",
        prompt_tokens=12,
        completion_tokens=reply.pop("completion_tokens", 8),
        finish_reason=reply.pop("finish_reason", "stop"),
        **reply,
    )
    start = answer.created_at
    Message.objects.filter(pk=answer.pk).update(
        first_token_at=start + timedelta(milliseconds=150),
        finished_at=start + timedelta(seconds=2),
    )
    answer.refresh_from_db()
    return answer


def make_history(
    owner: Any,
    conversations: int,
    per_conversation: int,
    text: str = "",
    *,
    title: str = "chat",
    batch_size: int | None = None,
) -> list[Conversation]:
    """Many conversations in two bulk INSERTs (or batches of them): `title i`, messages of
    "message n of <title><text>"."""
    created = Conversation.objects.bulk_create(
        (Conversation(owner=owner, title=f"{title} {i}") for i in range(conversations)),
        batch_size=batch_size,
    )
    Message.objects.bulk_create(
        (
            Message(conversation=c, role="user", content=f"message {n} of {c.title}{text}")
            for c in created
            for n in range(per_conversation)
        ),
        batch_size=batch_size,
    )
    return created


def in_export_order(owner: Any, *, among: list[Conversation] | None = None) -> list[str]:
    """The ids of the owner's conversations (or of those among these) in export.jsonl's order."""
    ordered = Conversation.objects.filter(owner=owner).oldest_created_first()
    if among is not None:
        ordered = ordered.filter(pk__in=[c.pk for c in among])
    return [str(pk) for pk in ordered.values_list("pk", flat=True)]

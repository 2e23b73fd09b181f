"""A message as the socket's events carry it (and the REST API shows it): plain JSON-able values,
made from its row without a query (what costs one, a version or a rating, only where it was
looked up)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, TypedDict

from conversations.models import Attachment, Feedback, Message


class FeedbackPayload(TypedDict):
    """Its owner's rating of a reply."""

    rating: str  # "up" or "down"
    reason: str


class AttachmentPayload(TypedDict):
    """A file attached to a user message, as it is listed (its text is for the prompt only)."""

    id: str
    name: str
    kind: str  # its MIME type, judged from its bytes
    size: int  # bytes


class MessagePayload(TypedDict):
    """A message as the socket's JSON protocol shows it; the same fields as the REST API's."""

    id: int
    parent: int | None
    role: str
    content: str
    reasoning: str  # an imported reply's reasoning, shown collapsed above it; never sent to a model
    status: str
    engine: str
    model: str
    model_slug: str
    model_name: str  # the name users saw the model by, for the reply's label
    system_prompt: str
    temperature: float | None
    max_tokens: int | None
    request_id: str
    created_at: str | None
    first_token_at: str | None
    finished_at: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    finish_reason: str
    ttft_ms: float | None
    tokens_per_second: float | None
    duration_s: float | None
    cancel_requested_at: str | None
    cancel_confirmed_at: str | None
    cancel_latency_ms: float | None
    cancelled_by: str
    error: str
    # [index, count, previous_id, next_id] among the versions of its turn, and whether it is on
    # the branch shown; None where not worked out (they cost a query).
    version: list[int | None] | None
    is_current: bool | None
    attachments: list[AttachmentPayload]
    # An assistant message's calls of an API caller's tools (OpenAI's shape), and a tool
    # message's call it answers (see Message.tool_calls).
    tool_calls: list[dict[str, Any]]
    tool_call_id: str
    # The owner's rating of a reply; None when not rated, or not looked up.
    feedback: FeedbackPayload | None


def feedback_payload(message: Message) -> FeedbackPayload | None:
    """A reply's rating where it was looked up: put on it by the page (`shown_feedback`) or
    read with it (`select_related("feedback")`); None otherwise, never a query more."""
    feedback: Feedback | None = message.shown_feedback
    if feedback is None and Message.feedback.is_cached(message):
        feedback = getattr(message, "feedback", None)
    if feedback is None:
        return None
    return FeedbackPayload(rating=feedback.rating, reason=feedback.reason)


def attachment_payload(attachment: Attachment) -> AttachmentPayload:
    return AttachmentPayload(
        id=str(attachment.pk), name=attachment.name, kind=attachment.kind, size=attachment.size
    )


def message_payload(message: Message) -> MessagePayload:
    """The message as tabs and API clients see it; `version` only where it was set on it (see
    services.branches), since it costs a query."""
    return MessagePayload(
        id=message.pk,
        parent=message.parent_id,
        role=message.role,
        content=message.content,
        reasoning=message.reasoning,
        status=message.status,
        engine=message.engine,
        model=message.model,
        model_slug=message.model_slug,
        model_name=message.model_name,
        system_prompt=message.system_prompt,
        temperature=message.temperature,
        max_tokens=message.max_tokens,
        request_id=message.request_id,
        created_at=_iso(message.created_at),
        first_token_at=_iso(message.first_token_at),
        finished_at=_iso(message.finished_at),
        prompt_tokens=message.prompt_tokens,
        completion_tokens=message.completion_tokens,
        finish_reason=message.finish_reason,
        ttft_ms=message.ttft_ms,
        tokens_per_second=message.tokens_per_second,
        duration_s=message.duration_s,
        cancel_requested_at=_iso(message.cancel_requested_at),
        cancel_confirmed_at=_iso(message.cancel_confirmed_at),
        cancel_latency_ms=message.cancel_latency_ms,
        cancelled_by=message.cancelled_by,
        error=message.error,
        version=message.version.as_list() if message.version is not None else None,
        is_current=message.is_current,
        attachments=[attachment_payload(a) for a in message.shown_attachments or ()],
        tool_calls=list(message.tool_calls or ()),
        tool_call_id=message.tool_call_id,
        feedback=feedback_payload(message),
    )


def _iso(moment: datetime | None) -> str | None:
    """ISO 8601 in UTC with a Z, as the REST API writes times."""
    if moment is None:
        return None
    text = moment.astimezone(UTC).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text

"""Feedback on replies: a conversation's owner rates a settled reply up or down, with a reason,
and the rated replies become records for evaluating models (the JSONL exports)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _

from conversations.models import Feedback, Message
from conversations.models.feedback import MAX_REASON
from conversations.services.prompt import load_history
from conversations.types import User


def feedback_rate(
    *, user: User, message: Message, rating: str, reason: str = ""
) -> Feedback | None:
    """Rate a reply: its rating and reason replace any the user gave it before. An empty
    rating takes the rating back (None is returned).

    The caller has checked that `user` owns the reply's conversation (the views answer 404
    otherwise). Raises ValidationError for a message that is not a settled reply, a rating
    other than up or down, or a reason past MAX_REASON characters.
    """
    if message.role != Message.Role.ASSISTANT or message.is_active:
        raise ValidationError({"message": _("Only a reply that has finished can be rated.")})
    if not rating:
        Feedback.objects.filter(message=message).delete()
        return None
    if rating not in Feedback.Rating.values:
        raise ValidationError({"rating": _("Rate a reply up or down.")})
    reason = reason.strip()
    if len(reason) > MAX_REASON:
        raise ValidationError(
            {
                "reason": _("Keep the reason to %(most)d characters (it has %(n)d).")
                % {"most": MAX_REASON, "n": len(reason)}
            }
        )
    # One row a reply (a unique key): a second tab's rating at the same moment updates the
    # row the first one made rather than adding one.
    feedback, _created = Feedback.objects.update_or_create(
        message=message,
        defaults={
            "owner": user,
            "rating": rating,
            "reason": reason,
            "model_slug": message.model_slug,
            "settings": reply_settings(message),
        },
    )
    return feedback


def reply_settings(message: Message) -> dict[str, Any]:
    """What the reply was generated with, as a rating keeps it."""
    return {
        "engine": message.engine,
        "model": message.model,
        "system_prompt": message.system_prompt,
        "temperature": message.temperature,
        "max_tokens": message.max_tokens,
    }


def with_feedback(messages: list[Message], *, user: User) -> list[Message]:
    """The messages, each reply with the user's `shown_feedback` on it (one query)."""
    replies = {m.pk: m for m in messages if m.role == Message.Role.ASSISTANT}
    if replies:
        for feedback in Feedback.objects.of(user).filter(message_id__in=list(replies)):
            replies[feedback.message_id].shown_feedback = feedback
    return messages


def evaluation_record(feedback: Feedback) -> dict[str, Any]:
    """A rated reply as a line of the JSONL exports: the prompt the model got (the system prompt
    the reply was generated with, then the branch before it, attachments' text included,
    images named; not cut to the model's context), the reply, its rating and the model."""
    reply = feedback.message
    history = load_history(reply.conversation_id, leaf=reply.parent_id)
    system = [{"role": "system", "content": reply.system_prompt}] if reply.system_prompt else []
    return {
        "message": reply.pk,
        "conversation": str(reply.conversation_id),
        "prompt": [*system, *({"role": m.role, "content": m.content} for m in history)],
        "reply": reply.content,
        "rating": feedback.rating,
        "reason": feedback.reason,
        "model": feedback.model_slug,
        "settings": feedback.settings,
        "created_at": feedback.created_at.isoformat(),
        "updated_at": feedback.updated_at.isoformat(),
    }

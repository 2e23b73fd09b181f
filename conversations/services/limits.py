"""Per-user limits on sends, checked before a reply is created."""

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from conversations.models import Conversation, Message
from conversations.services.errors import DuplicateSend, RateLimited, TooManyActive
from conversations.types import User


def check_send_allowed(
    user: User, *, conversation: Conversation | None = None, idempotency_key: str = ""
) -> None:
    """Raise RateLimited if this user may not start another reply now.

    A send whose idempotency key was already used raises DuplicateSend first: its message went
    through, and a limit's "try again later" would tell the client the opposite.

    reply_create calls this inside its transaction with the user's row locked, so sends racing
    in several processes are counted one after another.
    """
    if conversation is not None and idempotency_key:
        sent = Message.objects.filter(conversation=conversation, idempotency_key=idempotency_key)
        if sent.exists():
            raise DuplicateSend("This message was already sent.")
    mine = Message.objects.filter(conversation__owner=user)
    limit = settings.CHAT_MAX_ACTIVE_PER_USER
    if mine.active().count() >= limit:
        raise TooManyActive(
            f"You already have {limit} replies being written. Wait for one to finish or stop it."
        )
    per_minute = settings.CHAT_SENDS_PER_MINUTE
    recent = mine.filter(
        role=Message.Role.USER, created_at__gte=timezone.now() - timedelta(minutes=1)
    )
    if recent.count() >= per_minute:
        raise RateLimited(f"You can send {per_minute} messages a minute. Try again shortly.")

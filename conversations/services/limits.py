"""Per-user limits on sends and new conversations.

Rates are counted in the cache (conversations.services.ratelimits), not from rows: a user who
deletes conversations deletes their messages too, and with them any count taken from rows.
Replies being written are live state and are counted from rows.
"""

from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings

from conversations.models import Conversation, Message
from conversations.services import ratelimits
from conversations.services.errors import (
    DuplicateSend,
    RateLimited,
    TooManyActive,
    TooManyConversations,
)
from conversations.types import User

SEND = "send"
NEW_CONVERSATION = "new-conversation"


def check_send_allowed(
    user: User, *, conversation: Conversation | None = None, idempotency_key: str = ""
) -> None:
    """Raise RateLimited if this user may not start another reply now.

    A send whose idempotency key was already used raises DuplicateSend first: its message went
    through, and a limit's "try again later" would tell the client the opposite.

    The send's save (generation.sends.save) calls this inside its transaction with the user's row locked, and calls
    send_accepted once the send is saved, so sends racing in several processes are checked and
    counted one after another.
    """
    if conversation is not None and idempotency_key:
        sent = Message.objects.filter(conversation=conversation, idempotency_key=idempotency_key)
        if sent.exists():
            raise DuplicateSend("This message was already sent.")
    limit = settings.CHAT_MAX_ACTIVE_PER_USER
    if Message.objects.filter(conversation__owner=user).active().count() >= limit:
        raise TooManyActive(
            f"You already have {limit} replies being written. Wait for one to finish or stop it."
        )
    per_minute = settings.CHAT_SENDS_PER_MINUTE
    used = ratelimits.usage(SEND, user.pk)
    if used.count >= per_minute:
        raise RateLimited(
            f"You can send {per_minute} messages a minute. "
            f"Try again in {used.retry_after} seconds.",
            retry_after=used.retry_after,
        )


def send_accepted(user: User) -> None:
    """Count a send that check_send_allowed let through and that was saved."""
    ratelimits.hit(SEND, user.pk)


def check_create_allowed(user: User) -> None:
    """Count a new conversation, or raise TooManyConversations if it is one too many.

    The count goes up before it is compared (one atomic INCR), so creates racing in several
    processes cannot all see room for one more; a refused create gives its count back, so the
    window holds only the conversations started (or being started) in it.
    """
    _count_create(user)


@contextmanager
def conversation_counted(user: User) -> Iterator[None]:
    """Count a new conversation for the block that creates it, as check_create_allowed does.

    A block that raises (the conversation's first send refused by another limit, or anything
    that rolls its rows back) gives the count back: a refused call spends none of the budget.
    """
    counted = _count_create(user)
    try:
        yield
    except BaseException:
        ratelimits.refund(NEW_CONVERSATION, user.pk, counted=counted)
        raise


def _count_create(user: User) -> ratelimits.Usage:
    per_minute = settings.CHAT_CONVERSATIONS_PER_MINUTE
    used = ratelimits.hit(NEW_CONVERSATION, user.pk)
    if used.count > per_minute:
        # Given back too: refusals left in the count would refuse creates a refund made room for.
        ratelimits.refund(NEW_CONVERSATION, user.pk, counted=used)
        raise TooManyConversations(
            f"You can start {per_minute} conversations a minute. "
            f"Try again in {used.retry_after} seconds.",
            retry_after=used.retry_after,
        )
    return used

"""Per-user limits on sends and new conversations.

Rates are counted in the cache (conversations.services.ratelimits), not from rows: a user who
deletes conversations deletes their messages too, and with them any count taken from rows.
Replies being written are live state and are counted from rows.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from django.conf import settings
from django.db.models import Count, Q
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy as _lazy
from django.utils.translation import ngettext

from conversations.models import Conversation, Message
from conversations.services import ratelimits
from conversations.services.errors import (
    DuplicateSend,
    RateLimited,
    ReplyInProgress,
    TooManyActive,
    TooManyConversations,
)
from conversations.types import User

SEND = "send"
NEW_CONVERSATION = "new-conversation"

REPLY_IN_PROGRESS = _lazy(
    "A reply is still being written. Wait for it or press Stop, then send again."
)


@dataclass(frozen=True)
class SendCounts:
    """What a send's limits are judged on, read in one query while the owner's row is locked."""

    active: int  # the owner's replies being written
    here: int  # of them, in the send's conversation (one at a time there)
    stale: int  # of them, with a heartbeat that stopped (see generation.recovery)
    repeated: bool  # the send's idempotency key is on a message of its conversation already


def send_counts(
    user: User, *, conversation: Conversation, idempotency_key: str, stale: Q
) -> SendCounts:
    """The owner's active replies (`stale`: which of them nobody writes any more) and the key's
    use, in one query: a crowd of sends waits for each other's queries, so each counts."""
    active = Q(status__in=Message.ACTIVE_STATUSES)
    repeated = Q(conversation=conversation, idempotency_key=idempotency_key)
    if not idempotency_key:
        repeated = Q(pk__in=[])  # no key, nothing to repeat
    counts = (
        Message.objects.filter(conversation__owner=user)
        .filter(active | repeated)
        .aggregate(
            active=Count("pk", filter=active),
            here=Count("pk", filter=active & Q(conversation=conversation)),
            stale=Count("pk", filter=active & stale),
            repeated=Count("pk", filter=repeated),
        )
    )
    return SendCounts(
        active=counts["active"],
        here=counts["here"],
        stale=counts["stale"],
        repeated=counts["repeated"] > 0,
    )


def check_send_allowed(user: User, counts: SendCounts) -> None:
    """Raise SendRefused if this user may not start another reply now, in this order.

    A send whose idempotency key was already used raises DuplicateSend first: its message went
    through, and a limit's "try again later" would tell the client the opposite.

    The send's save (generation.sends.save) calls this inside its transaction with the user's
    row locked, and calls send_accepted once the send is saved, so sends racing in several
    processes are checked and counted one after another.
    """
    if counts.repeated:
        raise DuplicateSend(_("This message was already sent."))
    limit = settings.CHAT_MAX_ACTIVE_PER_USER
    if counts.active >= limit:
        raise TooManyActive(
            ngettext(
                "You already have %(limit)d reply being written. Wait for it to finish or stop it.",
                "You already have %(limit)d replies being written. Wait for one to finish or stop it.",
                limit,
            )
            % {"limit": limit}
        )
    per_minute = settings.CHAT_SENDS_PER_MINUTE
    used = ratelimits.usage(SEND, user.pk)
    if used.count >= per_minute:
        raise RateLimited(
            _("You can send %(n)d messages a minute. Try again in %(seconds)d seconds.")
            % {"n": per_minute, "seconds": used.retry_after},
            retry_after=used.retry_after,
        )
    if counts.here:
        raise ReplyInProgress(str(REPLY_IN_PROGRESS))


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
            _("You can start %(n)d conversations a minute. Try again in %(seconds)d seconds.")
            % {"n": per_minute, "seconds": used.retry_after},
            retry_after=used.retry_after,
        )
    return used

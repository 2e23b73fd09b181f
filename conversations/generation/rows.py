"""Every write a generation makes to its reply's row, each one a status transition.

These run on Channels' database thread (callers wrap them in database_sync_to_async). Each is
a conditional UPDATE through `Message.objects.transition`: a row that someone else settled
(recovery marked it interrupted, the conversation was deleted) is never overwritten, and the
writer learns that it lost.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db import DatabaseError, DataError, IntegrityError, InterfaceError, transaction
from django.utils import timezone

from conversations.engines.base import StreamResult, token_count
from conversations.events.payloads import MessagePayload, message_payload
from conversations.generation.plans import ReplyPlan
from conversations.generation.recovery import INTERRUPTED_ERROR
from conversations.models import Conversation, Message
from conversations.services import budgets
from conversations.services.branches import version_of
from conversations.services.text import make_storable

Status = Message.Status
ACTIVE = Message.ACTIVE_STATUSES


@dataclass(frozen=True)
class RecordedStop:
    requested_at: datetime
    cancelled_by: str


@dataclass(frozen=True)
class FlushResult:
    active: bool  # False: the row was settled or deleted by someone else
    stop: RecordedStop | None = None  # a Stop recorded in the row (by another process)


def mark_streaming(message_id: int, first_token_at: datetime) -> bool:
    return bool(
        Message.objects.transition(
            message_id, from_={Status.PENDING}, to=Status.STREAMING, first_token_at=first_token_at
        )
    )


@dataclass(frozen=True)
class Flush:
    """What one reply's flush writes: its text (None: unchanged since the last one) and heartbeat."""

    message_id: int
    content: str | None
    look_for_stop: bool
    length: int  # characters of the reply this flush covers
    first_token_at: datetime | None = None  # the first token came: the reply is streaming


def flush_all(flushes: list[Flush]) -> list[FlushResult | Exception]:
    """Every flush of a keep-alive round, in one transaction: one commit for all of them.

    A reply whose row cannot take its write (see failed_by_its_row) fails that transaction for
    all: then each is written in a transaction of its own, and the one that fails gets its error
    in its place, never the others'. A database that is away fails the round (raises).
    """
    try:
        with transaction.atomic():
            return [_flush_one(item) for item in flushes]
    except Exception as exc:
        if len(flushes) == 1 or not failed_by_its_row(exc):
            raise
    return [_flush_alone(item) for item in flushes]


def _flush_one(item: Flush) -> FlushResult:
    if item.first_token_at is not None:
        mark_streaming(item.message_id, item.first_token_at)
    return flush(item.message_id, item.content, look_for_stop=item.look_for_stop)


def _flush_alone(item: Flush) -> FlushResult | Exception:
    try:
        with transaction.atomic():
            return _flush_one(item)
    except Exception as exc:
        if not failed_by_its_row(exc):
            raise
        return exc


# SQLSTATE classes of a statement refused for what it writes: a data exception (22), an integrity
# violation (23), a program limit (54: a text too long for its search vector).
_REFUSED_VALUES = ("22", "23", "54")


def failed_by_its_row(exc: Exception) -> bool:
    """The write failed for what it holds (a value the driver or the database refuses), not for
    the database (away, locked, a deadlock), which would fail every write alike."""
    if isinstance(exc, InterfaceError):  # the connection itself is gone: not a DatabaseError
        return False
    if isinstance(exc, DataError | IntegrityError) or not isinstance(exc, DatabaseError):
        return True
    state = getattr(exc.__cause__, "sqlstate", None)
    return isinstance(state, str) and state[:2] in _REFUSED_VALUES


def flush(message_id: int, content: str | None, *, look_for_stop: bool) -> FlushResult:
    """Write the partial text (None: unchanged) and the heartbeat of an active reply."""
    fields: dict[str, Any] = {"heartbeat_at": timezone.now()}
    if content is not None:
        fields["content"] = make_storable(content)
    row = Message.objects.filter(pk=message_id)
    # Conditional on no recorded Stop: one query in the usual case, and a miss means "look".
    no_stop = row.filter(cancel_requested_at__isnull=True)
    if look_for_stop and no_stop.transition(from_=ACTIVE, to=None, **fields):
        return FlushResult(active=True)
    if not row.transition(from_=ACTIVE, to=None, **fields):
        return FlushResult(active=False)
    if not look_for_stop:
        return FlushResult(active=True)
    recorded = row.values_list("cancel_requested_at", "cancelled_by").first()
    if recorded is None or recorded[0] is None:
        return FlushResult(active=True)
    return FlushResult(active=True, stop=RecordedStop(recorded[0], recorded[1]))


def record_stop(message_id: int, cancelled_by: str, requested_at: datetime) -> None:
    """Keep a Stop in the row too: a group message can be lost, the row not."""
    # Conditional: the first Stop's time and author stand, and a finished reply is not touched.
    Message.objects.filter(cancel_requested_at__isnull=True).transition(
        message_id,
        from_=ACTIVE,
        to=None,
        cancel_requested_at=requested_at,
        cancelled_by=cancelled_by,
    )


@dataclass(frozen=True)
class Outcome:
    """How a generation ended, as it saves it."""

    status: Message.Status
    text: str
    error: str = ""
    error_detail: str = ""  # for operators: the admin shows it, users never see it
    engine_ready_at: datetime | None = None
    first_token_at: datetime | None = None
    result: StreamResult | None = None
    stop: RecordedStop | None = None  # for a cancelled reply: who asked, and when
    stop_confirmed_at: datetime | None = None


def finish(plan: ReplyPlan, outcome: Outcome, *, retrying: bool = False) -> MessagePayload | None:
    """Save the final state; return the row as it now is (ours, or the winner's if we lost).

    None if the row is gone (its conversation was deleted). `retrying`: an earlier attempt failed
    (the database was away), so recovery may have taken the row for a dead process's and marked
    it interrupted; this generation is alive and its text is whole, so it may still settle it.
    The reply's tokens go into the owner's ledger (services.budgets) in the same transaction as
    the row's settling, so a retried save counts them once.
    """
    fields = _final_fields(outcome)
    row = Message.objects.filter(pk=plan.message_id)
    with transaction.atomic():
        settled = row.transition(from_=ACTIVE, to=outcome.status, **fields)
        if not settled and retrying:
            settled = row.filter(error=INTERRUPTED_ERROR).transition(
                from_={Status.INTERRUPTED}, to=outcome.status, **fields
            )
        if settled and outcome.result is not None:
            budgets.record_usage(
                user_id=plan.owner_id,
                model_slug=plan.model.slug,
                prompt_tokens=fields["prompt_tokens"],
                completion_tokens=fields["completion_tokens"],
                cancelled=outcome.status == Status.CANCELLED,
                ttft_ms=_ttft_ms(plan, fields["first_token_at"]),
            )
    Conversation.objects.filter(pk=plan.conversation_id).update(updated_at=timezone.now())
    saved = row.first()
    if saved is None:
        return None
    saved.version = version_of(saved)  # the page keeps showing "2/3"
    return message_payload(saved)


def _ttft_ms(plan: ReplyPlan, first_token_at: datetime | None) -> float | None:
    """From the reply's row being made (the send) to its first token, as the usage page counts
    it: the wait a person had, a model's loading included."""
    created = plan.started.message["created_at"]
    if first_token_at is None or not created:
        return None
    return (first_token_at - datetime.fromisoformat(created)).total_seconds() * 1000


def _final_fields(outcome: Outcome) -> dict[str, Any]:
    """The reply's row as `outcome` leaves it."""
    fields: dict[str, Any] = {
        "content": make_storable(outcome.text),
        "error": make_storable(outcome.error),
        "error_detail": make_storable(outcome.error_detail),
        "finished_at": timezone.now(),
        "engine_ready_at": outcome.engine_ready_at,
        "first_token_at": outcome.first_token_at,
        "heartbeat_at": None,
    }
    result = outcome.result
    if result is not None:
        fields.update(
            # Checked again here, whatever the backend: a count the row cannot hold would lose
            # the whole reply.
            prompt_tokens=token_count(result.prompt_tokens),
            completion_tokens=token_count(result.completion_tokens),
            finish_reason=result.finish_reason or "",
            tool_calls=[call.openai() for call in result.tool_calls],
        )
    if outcome.status == Status.CANCELLED and outcome.stop is not None:
        confirmed = outcome.stop_confirmed_at or timezone.now()
        requested = outcome.stop.requested_at
        fields.update(
            cancel_requested_at=requested,
            cancel_confirmed_at=confirmed,
            cancel_latency_ms=max(0.0, (confirmed - requested).total_seconds() * 1000),
            cancelled_by=outcome.stop.cancelled_by,
        )
    else:
        # A Stop recorded after the last token stopped nothing: the reply is not a cancelled one.
        fields.update(cancel_requested_at=None, cancelled_by="")
    return fields


def unix_time(moment: float) -> datetime:
    return datetime.fromtimestamp(moment, UTC)

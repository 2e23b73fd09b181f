"""Writing the audit log (models.AuditEvent), and reading it back for its export and for a
conversation's owner.

`record` writes a row in the caller's transaction, so an action and its row commit or roll back
together. Who acted comes from the request being served (`AuditContextMiddleware` keeps it for
the request's duration, in a context variable, so that signal receivers deep in Django's own code
know it too) unless the caller names an actor; `acting_as` names a source that is not a person,
as an identity provider syncing a person's groups at their sign-in.
"""

from __future__ import annotations

import contextlib
import contextvars
import ipaddress
import json
from collections.abc import Awaitable, Callable, Iterator, Mapping
from datetime import datetime, timedelta
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from axes.helpers import get_client_ip_address
from django.conf import settings
from django.db.models import Model
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from conversations.models import AuditEvent, Conversation

Event = AuditEvent.Event
NAME_MAX = AuditEvent._meta.get_field("actor").max_length or 200

_request: contextvars.ContextVar[HttpRequest | None] = contextvars.ContextVar(
    "audit_request", default=None
)
_source: contextvars.ContextVar[str] = contextvars.ContextVar("audit_source", default="")


def record(
    event: str,
    *,
    subject: Model | None = None,
    conversation: Conversation | None = None,
    actor: Model | None = None,
    request: HttpRequest | None = None,
    detail: Mapping[str, Any] | None = None,
    **fields: Any,
) -> AuditEvent:
    """Write one row: `event` (an AuditEvent.Event), done by `actor` (default: the request's
    signed-in user, or the source `acting_as` names), to `subject` (a user) or a conversation
    (its owner is the subject), with `detail` and the other keywords as its JSON detail."""
    request = request if request is not None else _request.get()
    if actor is None and request is not None:
        signed_in = getattr(request, "user", None)
        actor = signed_in if signed_in is not None and signed_in.is_authenticated else None
    if subject is None and conversation is not None:
        subject = conversation.owner
    return AuditEvent.objects.create(
        event=event,
        actor_id=actor.pk if actor is not None else None,
        actor=(str(actor) if actor is not None else _source.get())[:NAME_MAX],
        subject_id=subject.pk if subject is not None else None,
        subject=str(subject)[:NAME_MAX] if subject is not None else "",
        conversation_id=conversation.pk if conversation is not None else None,
        ip=_address(request),
        detail={**(detail or {}), **fields},
    )


def _address(request: HttpRequest | None) -> str | None:
    if request is None:
        return None
    address = get_client_ip_address(request)  # as the sign-in throttle sees it
    try:
        return str(ipaddress.ip_address(address or ""))
    except ValueError:  # a test client's or a socket's peer that is not an address
        return None


@contextlib.contextmanager
def acting_as(source: str) -> Iterator[None]:
    """Rows written meanwhile without a signed-in actor name `source` as who acted."""
    token = _source.set(source)
    try:
        yield
    finally:
        _source.reset(token)


class AuditContextMiddleware:
    """Keeps the request being served where `record` finds it (its user, its address)."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> HttpResponse | Awaitable[HttpResponse]:
        if self.is_async:
            return self._acall(request)
        token = _request.set(request)
        try:
            response: HttpResponse = self.get_response(request)
            return response
        finally:
            _request.reset(token)

    async def _acall(self, request: HttpRequest) -> HttpResponse:
        token = _request.set(request)
        try:
            response: HttpResponse = await self.get_response(request)
            return response
        finally:
            _request.reset(token)


def staff_view(
    request: HttpRequest, conversation: Conversation, *, what: str, text_shown: bool
) -> None:
    """A staff member opened another person's conversation (`what`: the page or the file), its
    messages shown or hidden (CHAT_STAFF_CAN_READ)."""
    if conversation.owner_id != request.user.pk:
        record(
            Event.STAFF_VIEW,
            conversation=conversation,
            request=request,
            view=what,
            text_shown=text_shown,
        )


def staff_views_shown_to_owner(conversation: Conversation) -> list[AuditEvent]:
    """The staff's views of it that showed its messages, newest first, as its owner's page lists
    them (a superuser's too where CHAT_STAFF_CAN_READ keeps other staff from reading)."""
    views = AuditEvent.objects.staff_views_of(conversation.pk).filter(detail__text_shown=True)
    return list(views.only("at", "actor", "detail")[:SHOWN_TO_OWNER])


SHOWN_TO_OWNER = 5


def as_json_line(event: AuditEvent) -> str:
    return json.dumps(
        {
            "id": event.pk,
            "at": event.at.isoformat(),
            "event": event.event,
            "actor_id": event.actor_id,
            "actor": event.actor,
            "subject_id": event.subject_id,
            "subject": event.subject,
            "conversation_id": str(event.conversation_id) if event.conversation_id else None,
            "ip": event.ip,
            "detail": event.detail,
        },
        ensure_ascii=False,
    )


def events_since(since: datetime) -> Iterator[AuditEvent]:
    """Oldest first, read in batches: an export of years of rows holds a batch in memory."""
    return AuditEvent.objects.filter(at__gte=since).order_by("at", "id").iterator(chunk_size=2000)


def prune(*, now: datetime | None = None) -> int:
    """Delete the rows older than CHAT_AUDIT_RETENTION_DAYS (none when 0); how many went."""
    days: int = settings.CHAT_AUDIT_RETENTION_DAYS
    if not days:
        return 0
    return AuditEvent.objects.prune(before=(now or timezone.now()) - timedelta(days=days))

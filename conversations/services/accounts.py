"""A person's account: the sessions they are signed in with, and signing out of all of them.

Each login records its session (SignIn: the device, when last seen; the receiver below); the
account page lists those whose session is still live. Signing out everywhere deletes every
session of the user's, which closes their sockets in every process (conversations.signals) and
is followed by stopping their replies (generation.deprovision, by the page).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth import SESSION_KEY
from django.contrib.auth.signals import user_logged_in
from django.contrib.sessions.models import Session
from django.db import transaction
from django.dispatch import receiver
from django.http import HttpRequest
from django.utils import timezone

from conversations.models import SignIn
from conversations.services import audit
from conversations.types import User

# A session's "last seen" is written at most this often (a write per request would cost more).
SEEN_EVERY = timedelta(minutes=5)
SEEN_AT = "chatsite.seen_at"  # in the session: when its SignIn was last written
MAX_USER_AGENT = 300


@receiver(user_logged_in)
def _logged_in(sender: Any, request: HttpRequest, user: User, **kwargs: Any) -> None:
    sign_in_recorded(request, user)


def sign_in_recorded(request: HttpRequest, user: User) -> None:
    """The user signed in with `request`'s session: remember its device."""
    key = request.session.session_key
    if key is None:
        return
    now = timezone.now()
    SignIn.objects.update_or_create(
        session_key=key,
        defaults={
            "user": user,
            "user_agent": request.headers.get("User-Agent", "")[:MAX_USER_AGENT],
            "last_seen_at": now,
        },
    )
    request.session[SEEN_AT] = now.timestamp()


def seen(request: HttpRequest) -> None:
    """A signed-in request: its session was seen now (written once in SEEN_EVERY)."""
    key = request.session.session_key
    if key is None or not request.user.is_authenticated:
        return
    now = timezone.now()
    last = request.session.get(SEEN_AT)
    if isinstance(last, float) and now.timestamp() - last < SEEN_EVERY.total_seconds():
        return
    SignIn.objects.filter(session_key=key).update(last_seen_at=now)
    request.session[SEEN_AT] = now.timestamp()


def live_sign_ins(user: User) -> list[SignIn]:
    """The user's sign-ins whose session is still live, most recently seen first."""
    live = Session.objects.filter(expire_date__gt=timezone.now()).values("session_key")
    return list(SignIn.objects.filter(user=user, session_key__in=live))


def sign_out_everywhere(user: User) -> int:
    """Delete every live session of the user's (those from before sign-ins were recorded too);
    how many. Each deleted session closes its sockets (conversations.signals)."""
    # A session names its user only inside its encoded data: reading them all is the one way to
    # find those no SignIn recorded (and finds the recorded ones too). A rare, deliberate action.
    keys = [
        session.session_key
        for session in Session.objects.filter(expire_date__gt=timezone.now()).iterator()
        if str(session.get_decoded().get(SESSION_KEY)) == str(user.pk)
    ]
    with transaction.atomic():
        deleted, _ = Session.objects.filter(session_key__in=keys).delete()
        SignIn.objects.filter(user=user).delete()
        audit.record(
            audit.Event.LOGOUT, actor=user, subject=user, everywhere=True, sessions=deleted
        )
    return deleted

"""Tell a user's open sockets, in every process, that their sessions changed.

Each socket joins its user's group (`user_group`) and re-checks its own session when told;
a logout names the one session that ended, so its sockets close without a query.
"""

from __future__ import annotations

import logging
from typing import Any

from django.contrib.auth import SESSION_KEY
from django.contrib.auth.models import AbstractBaseUser
from django.contrib.auth.signals import user_logged_out
from django.contrib.sessions.models import Session
from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver
from django.http import HttpRequest

from conversations.events import broadcast
from conversations.events.protocol import SessionsChanged
from conversations.models import SignIn

logger = logging.getLogger("chatsite.sessions")


def user_group(user_id: int) -> str:
    return f"user.{user_id}"


def sessions_changed(user_id: int, *, ended_session: str = "") -> None:
    """After the commit: sockets must not re-check before the change is visible to them."""

    def send() -> None:
        try:
            event = SessionsChanged(message_id=None, user_id=user_id, ended_session=ended_session)
            broadcast.to_group_from_sync(user_group(user_id), event)
        except Exception as exc:  # sockets still re-check before every frame and at expiry
            logger.warning("could not tell sockets of user %s: %r", user_id, exc)

    transaction.on_commit(send)


@receiver(user_logged_out)
def _logged_out(
    sender: Any, request: HttpRequest, user: AbstractBaseUser | None, **kwargs: Any
) -> None:
    if user is not None and user.pk is not None:
        sessions_changed(user.pk, ended_session=request.session.session_key or "")


@receiver(post_save, sender="auth.User")
def _user_saved(
    sender: Any, instance: AbstractBaseUser, update_fields: Any = None, **kwargs: Any
) -> None:
    # A login only stamps last_login; anything else may be a new password or a deactivation.
    if update_fields is not None and set(update_fields) <= {"last_login"}:
        return
    if not kwargs.get("created"):
        sessions_changed(instance.pk)


@receiver(post_delete, sender=Session)
def _session_deleted(sender: Any, instance: Session, **kwargs: Any) -> None:
    SignIn.objects.filter(session_key=instance.session_key).delete()
    user_id = instance.get_decoded().get(SESSION_KEY)
    if user_id is not None:
        sessions_changed(int(user_id), ended_session=instance.session_key)

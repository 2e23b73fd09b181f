"""Is the session a socket was opened with still signing in the same user?

A socket outlives the request that authenticated it, so it asks again: before acting on any
frame, when its user's sessions change (logout, password change, deactivation, a deleted
session: see conversations.signals), and when its session expires. The check is Django's own
(`django.contrib.auth.get_user`: session present and unexpired, user active, password hash
unchanged), without its side effects on the session. A socket opening reads its conversation and
its session's expiry in one trip (socket_opening).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from importlib import import_module

from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, load_backend
from django.contrib.sessions.backends.base import SessionBase
from django.utils.crypto import constant_time_compare

from conversations.models import Conversation
from conversations.services.conversations import conversation_visible
from conversations.types import AnyUser, User


def _store(session_key: str) -> SessionBase:
    engine = import_module(settings.SESSION_ENGINE)
    store: SessionBase = engine.SessionStore(session_key)
    return store


def session_signs_in(session_key: str | None, user_id: int, *, user: User | None = None) -> bool:
    """True while the session exists, is unexpired, and still signs in this active user.

    `user`: that user's row, read a moment ago (a send has it locked), instead of reading it
    again; judged by the session's backend as the backend's get_user would judge it.
    """
    if not session_key:
        return False
    store = _store(session_key)
    backend_path = str(store.get(BACKEND_SESSION_KEY, ""))
    if (
        str(store.get(SESSION_KEY)) != str(user_id)
        or backend_path not in settings.AUTHENTICATION_BACKENDS
    ):
        return False  # gone, expired (an expired session loads empty), or another user's
    backend = load_backend(backend_path)
    can_sign_in = getattr(backend, "user_can_authenticate", None)
    if user is None or user.pk != user_id or can_sign_in is None:
        user = backend.get_user(user_id)
    elif not can_sign_in(user):
        user = None
    if user is None:  # deleted, or no longer allowed to sign in (deactivated)
        return False
    session_hash = store.get(HASH_SESSION_KEY) or ""
    return any(
        constant_time_compare(session_hash, known)
        for known in (user.get_session_auth_hash(), *user.get_session_auth_fallback_hash())
    )


def session_expires_at(session_key: str | None) -> datetime | None:
    """When the session ends unless it is used again (sockets re-check then)."""
    if not session_key:
        return None
    store = _store(session_key)
    model = getattr(store, "model", None)
    if model is not None:  # database sessions: the row's expiry is the one that counts
        expiry: datetime | None = (
            model.objects.filter(session_key=session_key)
            .values_list("expire_date", flat=True)
            .first()
        )
        return expiry
    return store.get_expiry_date()


@dataclass(frozen=True)
class SocketOpening:
    """What a socket reads as it opens: its conversation, and when its session expires."""

    conversation: Conversation
    session_expires: datetime | None


def socket_opening(
    *, user: AnyUser, conversation_id: uuid.UUID, session_key: str | None
) -> SocketOpening | None:
    """The conversation and the session's expiry, in one trip to the database thread; None if
    the user may not see the conversation."""
    conversation = conversation_visible(user=user, conversation_id=conversation_id)
    if conversation is None:
        return None
    return SocketOpening(conversation, session_expires_at(session_key))

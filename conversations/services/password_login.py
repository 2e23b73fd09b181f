"""Password login, which CHAT_PASSWORD_LOGIN=0 keeps to superusers.

A company that signs its people in through its own identity provider turns local passwords off:
a password an ex-employee still knows must not let them in. Superusers keep theirs, so that the
site has a way in when the provider is down or misconfigured.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.backends import ModelBackend

# Its dotted path, as AUTHENTICATION_BACKENDS and a session that it signed in name it.
BACKEND = "conversations.services.password_login.PasswordBackend"


class PasswordBackend(ModelBackend):
    """Django's ModelBackend, for superusers only while CHAT_PASSWORD_LOGIN is off: a session
    it signed in ends too (sockets and pages ask it again), as a deactivated user's does."""

    def user_can_authenticate(self, user: Any) -> bool:
        if not super().user_can_authenticate(user):
            return False
        return bool(settings.CHAT_PASSWORD_LOGIN or user.is_superuser)

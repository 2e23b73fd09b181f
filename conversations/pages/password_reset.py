"""Password reset by email, offered only where an email server is configured (EMAIL_HOST):
without one the link could never arrive, so the page is not there (404) and the login page
does not offer it. Django's own views do the rest (a one-use, expiring link; accounts without a
local password, such as single sign-on's, get no email)."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.http import Http404, HttpRequest, HttpResponseBase

_reset = auth_views.PasswordResetView.as_view()


def password_reset(request: HttpRequest) -> HttpResponseBase:
    if not settings.CHAT_PASSWORD_RESET:
        raise Http404("Password reset needs an email server: ask staff for a new password.")
    return _reset(request)

"""The ways in that the login page offers, for its template (a context processor)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest


def sign_in_options(request: HttpRequest) -> dict[str, Any]:
    return {
        "sign_in": {
            "open_signup": settings.CHAT_OPEN_SIGNUP,
            "password_reset": settings.CHAT_PASSWORD_RESET,
            "oidc_name": settings.CHAT_OIDC_NAME
            if getattr(settings, "OIDC_ENABLED", False)
            else "",
        }
    }

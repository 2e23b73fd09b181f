"""Who may read the API's schema and docs."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework.permissions import BasePermission
from rest_framework.request import Request


class DocsAccess(BasePermission):
    """Signed-in users (session or token), or everyone when CHAT_API_DOCS_PUBLIC is set."""

    def has_permission(self, request: Request, view: Any) -> bool:
        return bool(settings.CHAT_API_DOCS_PUBLIC or request.user.is_authenticated)

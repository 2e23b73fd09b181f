"""`Authorization: Bearer <key>` with a personal API token."""

from __future__ import annotations

from typing import TYPE_CHECKING

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.request import Request

from conversations.services.tokens import api_token_user
from conversations.types import User

if TYPE_CHECKING:
    # Only for mypy: drf_spectacular.openapi imports DRF's APIView, whose class body loads this
    # module (DEFAULT_AUTHENTICATION_CLASSES), so importing it here at run time would be circular.
    from drf_spectacular.openapi import AutoSchema


class BearerTokenAuthentication(BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[User, None] | None:
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() != self.keyword.lower().encode():
            return None  # not ours: let session authentication try
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("Send exactly `Authorization: Bearer <token>`.")
        try:
            key = parts[1].decode()
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("Invalid token.") from None
        user = api_token_user(key)
        if user is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked token.")
        return user, None

    def authenticate_header(self, request: Request) -> str:
        return f'{self.keyword} realm="api"'


class BearerTokenScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    """Describes the token to the OpenAPI schema (found by drf-spectacular when this is imported)."""

    target_class = "conversations.api.authentication.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: AutoSchema) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer"}

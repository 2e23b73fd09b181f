"""Who calls: `Authorization: Bearer cs_...`, a personal API token (the REST API's).

Tokens only: the gateway reads no session cookie, so a page on another site cannot make a
signed-in browser call it, and its views need no CSRF check (they are csrf_exempt).
"""

from __future__ import annotations

from dataclasses import dataclass

from channels.db import database_sync_to_async
from django.http import HttpRequest

from conversations.gateway.errors import unauthenticated
from conversations.models import ApiToken
from conversations.services.tokens import api_token_of
from conversations.types import User

MAX_KEY_CHARS = 200  # keys are 46 characters; anything far longer is not one


@dataclass(frozen=True)
class Caller:
    user: User
    token_id: int  # the token the call came with: its revocation ends the call (gateway.revocation)


async def caller(request: HttpRequest) -> User:
    """The token's active user; a 401 (with WWW-Authenticate) for anything else."""
    return (await authenticate(request)).user


async def authenticate(request: HttpRequest) -> Caller:
    """The active token the call came with, and its user; a 401 for anything else."""
    scheme, _, key = request.headers.get("Authorization", "").partition(" ")
    key = key.strip()
    if scheme.lower() != "bearer" or not key:
        raise unauthenticated(
            "Send a personal API token as `Authorization: Bearer <token>`; make one at "
            "/settings/tokens/."
        )
    token: ApiToken | None = None
    if len(key) <= MAX_KEY_CHARS and key.isascii():
        token = await database_sync_to_async(api_token_of)(key)
    if token is None:
        raise unauthenticated("Invalid or revoked API token.")
    return Caller(token.user, token.pk)

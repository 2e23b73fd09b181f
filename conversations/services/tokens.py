"""Writes and look-ups for personal API tokens.

A key is 32 random bytes, so a fast SHA-256 of it is as safe to store as a slow password hash:
nobody can guess their way back from the hash, and checking a request costs one indexed query.

A revocation reaches the gateway's calls made with the token, in every process, through the
channel layer (TokenRevoked to the token's group, after the commit): their replies stop.
"""

import hashlib
import secrets
from datetime import timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from conversations.events import broadcast
from conversations.events.protocol import TokenRevoked
from conversations.models import ApiToken
from conversations.services import audit
from conversations.types import User

KEY_PREFIX = "cs_"
SHOWN_PREFIX_LENGTH = 10
# last_used_at is a hint for the owner, not an audit log: one write a minute per token is enough.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def key_hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def api_token_create(
    *, user: User, name: str, recording: str = ApiToken.Recording.DEFAULT
) -> tuple[ApiToken, str]:
    """Create a token; returns it and its key, which is not stored and cannot be shown again.
    `recording`: whether the gateway keeps its calls (an ApiToken.Recording)."""
    if recording not in ApiToken.Recording.values:
        raise ValueError(f"unknown recording {recording!r}")
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    with transaction.atomic():
        token = ApiToken.objects.create(
            user=user,
            name=name.strip()[:100] or "API token",
            prefix=key[:SHOWN_PREFIX_LENGTH],
            key_hash=key_hash(key),
            recording=recording,
        )
        audit.record(audit.Event.TOKEN_CREATED, subject=user, token=token.prefix, name=token.name)
    return token, key


def api_token_revoke(*, token: ApiToken) -> bool:
    """Revoke a token; False if it was already revoked."""
    # Conditional, so two revokes (two tabs) keep the first revocation time.
    with transaction.atomic():
        revoked = ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
        if revoked:
            audit.record(
                audit.Event.TOKEN_REVOKED, subject=token.user, token=token.prefix, name=token.name
            )
            # Robust: the revocation stands if the channel layer is down (its calls then run on
            # to their end, but no new one is let in).
            transaction.on_commit(lambda: _announce_revoked(token.pk), robust=True)
    return revoked == 1


def _announce_revoked(token_id: int) -> None:
    broadcast.to_group_from_sync(
        broadcast.token_group(token_id), TokenRevoked(message_id=None, token_id=token_id)
    )


def api_token_is_active(token_id: int) -> bool:
    return ApiToken.objects.active().filter(pk=token_id).exists()


def api_token_user(key: str) -> User | None:
    """The active user a key belongs to, or None for an unknown, revoked or disabled one."""
    token = api_token_for(key)
    return token.user if token is not None else None


def api_token_for(key: str) -> ApiToken | None:
    """The active token of an active user a key is (its `user` loaded), or None; its use is
    noted in last_used_at."""
    token = ApiToken.objects.active().select_related("user").filter(key_hash=key_hash(key)).first()
    if token is None or not token.user.is_active:
        return None
    now = timezone.now()
    ApiToken.objects.filter(pk=token.pk).filter(
        Q(last_used_at__isnull=True) | Q(last_used_at__lt=now - LAST_USED_RESOLUTION)
    ).update(last_used_at=now)
    return token

"""Read-only share links: a snapshot of a conversation that anyone with its link may read.

A link's token is 32 random bytes, stored only as its SHA-256 (as API keys are: see
conversations.services.tokens): the link is shown once, when it is made, and a lookup is one indexed
query on the hash. The snapshot is taken when the link is made, so later messages, renames and
other versions of a turn never reach its readers; revoking it makes the link unknown at once.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from conversations.models import Conversation, Message, ShareLink
from conversations.services import branches
from conversations.services.tokens import key_hash
from conversations.types import User

# What a reader sees of each message; nothing else is copied (no ids, no owner, no settings).
SNAPSHOT_FIELDS = ("role", "content", "created_at", "model_slug", "status", "finish_reason")
# token_urlsafe(32) is 43 characters; anything much longer is not a token and is not hashed.
MAX_TOKEN_LENGTH = 64


def _snapshot(message: Message) -> dict[str, str]:
    return {
        "role": message.role,
        "content": message.content,
        "created_at": message.created_at.isoformat(),
        "model_slug": message.model_slug,
        "status": message.status,
        "finish_reason": message.finish_reason,
    }


def share_create(*, conversation: Conversation, created_by: User) -> tuple[ShareLink, str]:
    """Make a link to the conversation as it is now: its title and the branch shown.

    Returns the link and its token, which is not stored and cannot be shown again. The caller
    checks that `created_by` owns the conversation.
    """
    token = secrets.token_urlsafe(32)
    share = ShareLink.objects.create(
        conversation=conversation,
        created_by=created_by,
        token_hash=key_hash(token),
        title=str(conversation),
        messages=[_snapshot(m) for m in branches.visible_branch(conversation)],
    )
    return share, token


def share_revoke(*, share: ShareLink) -> bool:
    """Revoke a link; False if it was already revoked."""
    # Conditional, so two revokes (two tabs, the admin and the owner) keep the first time.
    revoked = ShareLink.objects.filter(pk=share.pk, revoked_at__isnull=True).update(
        revoked_at=timezone.now()
    )
    return revoked == 1


def share_for_token(token: str) -> ShareLink | None:
    """The active link with this token, or None for an unknown or revoked one."""
    if not token or len(token) > MAX_TOKEN_LENGTH:
        return None
    return ShareLink.objects.active().filter(token_hash=key_hash(token)).first()


@dataclass(frozen=True)
class SharedMessage:
    """A message of a snapshot as its page shows it."""

    role: str
    content: str
    created_at: datetime | None
    model_slug: str
    status: str
    finish_reason: str


def shared_messages(share: ShareLink) -> list[SharedMessage]:
    """The snapshot's messages, in order, with their times as datetimes again."""
    entries: list[dict[str, Any]] = share.messages if isinstance(share.messages, list) else []
    return [
        SharedMessage(
            role=str(entry.get("role", "")),
            content=str(entry.get("content", "")),
            created_at=parse_datetime(str(entry.get("created_at", ""))),
            model_slug=str(entry.get("model_slug", "")),
            status=str(entry.get("status", "")),
            finish_reason=str(entry.get("finish_reason", "")),
        )
        for entry in entries
    ]

"""Read-only share links: a snapshot of a conversation that anyone with its link may read.

A link's token is 32 random bytes, stored only as its SHA-256 (as API keys are: see
conversations.services.tokens): the link is shown once, when it is made, and a lookup is one indexed
query on the hash. The snapshot is taken when the link is made, so later messages, renames and
other versions of a turn never reach its readers; revoking it makes the link unknown at once.

A snapshot is stored once per state of the branch (ShareSnapshot, keyed by the conversation and
the digest of its messages) and shared by the links made in that state; it is deleted with the
last live link that shows it. A user has at most CHAT_SHARES_PER_USER live links.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.translation import ngettext

from conversations.models import Conversation, Message, ShareLink, ShareSnapshot
from conversations.services import audit, branches
from conversations.services.tokens import key_hash
from conversations.types import User

# What a reader sees of each message; nothing else is copied (no ids, no owner, no settings).
SNAPSHOT_FIELDS = (
    "role",
    "content",
    "created_at",
    "model_slug",
    "model_name",
    "status",
    "finish_reason",
)
# A message sent with files also holds their names (never their text or the files): readers of
# a link see that a file was attached, not what it held.
# token_urlsafe(32) is 43 characters; anything much longer is not a token and is not hashed.
MAX_TOKEN_LENGTH = 64


class TooManyShares(Exception):
    """A link refused: its creator already has CHAT_SHARES_PER_USER live links."""

    code = "too_many_shares"


def _snapshot(message: Message) -> dict[str, Any]:
    shown: dict[str, Any] = {
        "role": message.role,
        "content": message.content,
        "created_at": message.created_at.isoformat(),
        "model_slug": message.model_slug,
        "model_name": message.model_name,
        "status": message.status,
        "finish_reason": message.finish_reason,
    }
    if message.shown_attachments:  # left out otherwise: earlier snapshots keep their digest
        shown["attachments"] = [attachment.name for attachment in message.shown_attachments]
    return shown


def snapshot_digest(messages: list[dict[str, Any]]) -> str:
    """The SHA-256 of a snapshot's messages: the same messages always give the same digest."""
    # Keys sorted, and ASCII (the default): one text is one byte string, whatever it holds.
    canonical = json.dumps(messages, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def check_share_allowed(user: User) -> None:
    """Raise TooManyShares if the user may not make another link now."""
    limit = settings.CHAT_SHARES_PER_USER
    if ShareLink.objects.active().filter(created_by=user).count() >= limit:
        raise TooManyShares(
            ngettext(
                "You have %(limit)d live share link, the most allowed. Revoke it to make another.",
                "You have %(limit)d live share links, the most allowed. Revoke one to make another.",
                limit,
            )
            % {"limit": limit}
        )


def share_create(*, conversation: Conversation, created_by: User) -> tuple[ShareLink, str]:
    """Make a link to the conversation as it is now: its title and the branch shown.

    Returns the link and its token, which is not stored and cannot be shown again. Raises
    TooManyShares past CHAT_SHARES_PER_USER live links. The caller checks that `created_by`
    owns the conversation.
    """
    messages = [_snapshot(m) for m in branches.visible_branch(conversation)]
    token = secrets.token_urlsafe(32)
    with transaction.atomic():
        # The creator's row locked: links made at once (two tabs, two processes) are counted,
        # and find or store their snapshot, one after another.
        get_user_model().objects.select_for_update().get(pk=created_by.pk)
        check_share_allowed(created_by)
        share = ShareLink.objects.create(
            conversation=conversation,
            created_by=created_by,
            token_hash=key_hash(token),
            title=str(conversation),
            snapshot_id=_stored_snapshot(conversation, messages),
            message_count=len(messages),
        )
        audit.record(
            audit.Event.SHARE_CREATED,
            conversation=conversation,
            actor=created_by,
            share=share.pk,
            messages=share.message_count,
        )
    return share, token


def _stored_snapshot(conversation: Conversation, messages: list[dict[str, Any]]) -> int:
    """The id of the conversation's snapshot of these messages, stored now if it was not."""
    digest = snapshot_digest(messages)
    stored = _stored_snapshot_id(conversation, digest)
    if stored is not None:
        return stored
    try:
        with transaction.atomic():  # a savepoint: the link is still made if this insert loses
            return ShareSnapshot.objects.create(
                conversation=conversation, digest=digest, messages=messages
            ).pk
    except IntegrityError:
        # Stored meanwhile by a link made at the same moment: SQLite has no row locks to make
        # the two wait for each other.
        return (
            ShareSnapshot.objects.filter(conversation=conversation, digest=digest)
            .values_list("pk", flat=True)
            .get()
        )


def _stored_snapshot_id(conversation: Conversation, digest: str) -> int | None:
    # Locked until the link is saved: a revoke that would delete it waits, then sees the link.
    # Only its id is read, not the messages it holds.
    found: int | None = (
        ShareSnapshot.objects.select_for_update()
        .filter(conversation=conversation, digest=digest)
        .values_list("pk", flat=True)
        .first()
    )
    return found


def share_revoke(*, share: ShareLink) -> bool:
    """Revoke a link; False if it was already revoked.

    The link's row stays (title, message count, times); its snapshot goes with the last live
    link that shows it.
    """
    with transaction.atomic():
        # Conditional, so two revokes (two tabs, the admin and the owner) keep the first time.
        revoked = ShareLink.objects.filter(pk=share.pk, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
        if revoked and share.snapshot_id is not None:
            _delete_if_unshown(share.snapshot_id)
        if revoked:
            audit.record(audit.Event.SHARE_REVOKED, conversation=share.conversation, share=share.pk)
    return revoked == 1


def _delete_if_unshown(snapshot_id: int) -> None:
    # Locked first, as share_create locks it: a link being made to it is either seen below, or
    # finds it gone and stores the messages again.
    locked = ShareSnapshot.objects.select_for_update().filter(pk=snapshot_id)
    if locked.values_list("pk", flat=True).first() is None:
        return  # deleted meanwhile
    if not ShareLink.objects.active().filter(snapshot_id=snapshot_id).exists():
        # only(): deleting reads the rows it deletes, and their messages are not needed.
        ShareSnapshot.objects.filter(pk=snapshot_id).only("pk").delete()


def share_for_token(token: str) -> ShareLink | None:
    """The active link with this token, with its snapshot, or None for an unknown or revoked
    one."""
    if not token or len(token) > MAX_TOKEN_LENGTH:
        return None
    links = ShareLink.objects.active().select_related("snapshot")
    return links.filter(token_hash=key_hash(token)).first()


@dataclass(frozen=True)
class SharedMessage:
    """A message of a snapshot as its page shows it."""

    role: str
    content: str
    created_at: datetime | None
    model_slug: str
    model_name: str  # "" in snapshots made before replies recorded it: the label shows the slug
    status: str
    finish_reason: str
    attachments: tuple[str, ...] = ()  # the names of the files it was sent with


def shared_messages(share: ShareLink) -> list[SharedMessage]:
    """The snapshot's messages, in order, with their times as datetimes again."""
    stored = share.snapshot.messages if share.snapshot is not None else []
    entries: list[dict[str, Any]] = stored if isinstance(stored, list) else []
    return [
        SharedMessage(
            role=str(entry.get("role", "")),
            content=str(entry.get("content", "")),
            created_at=parse_datetime(str(entry.get("created_at", ""))),
            model_slug=str(entry.get("model_slug", "")),
            model_name=str(entry.get("model_name", "")),
            status=str(entry.get("status", "")),
            finish_reason=str(entry.get("finish_reason", "")),
            attachments=tuple(str(name) for name in entry.get("attachments") or ()),
        )
        for entry in entries
    ]

"""The JSONL export's keyset cursor: where the previous page ended, signed by this server.

A cursor is a position in ConversationQuerySet.oldest_created_first()'s order, signed with
SECRET_KEY (django.core.signing): a client hands it back as it got it, and one that was forged,
garbled or cut short is refused rather than guessed at.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from django.core import signing
from rest_framework import exceptions

from conversations.models import Conversation, ConversationQuerySet

SALT = "conversations.api.export-cursor"
# No timestamp (signing.dumps would add one): the same page always has the same URL.
SIGNER = signing.Signer(salt=SALT)
INVALID = (
    "Not a cursor from this server: follow the previous page's Link header, "
    "or start again without one."
)


@dataclass(frozen=True)
class Position:
    created_at: datetime
    pk: uuid.UUID


def cursor_after(conversation: Conversation) -> str:
    """The cursor of the page that starts after this conversation."""
    return SIGNER.sign_object([conversation.created_at.isoformat(), conversation.pk.hex])


def position(cursor: str) -> Position:
    """Where a cursor points; a ValidationError (400) for one this server did not sign."""
    try:
        created_at, pk = SIGNER.unsign_object(cursor)
        return Position(datetime.fromisoformat(created_at), uuid.UUID(hex=pk))
    except (signing.BadSignature, ValueError, TypeError):
        raise exceptions.ValidationError({"cursor": [INVALID]}) from None


def after(conversations: ConversationQuerySet, cursor: str) -> ConversationQuerySet:
    """The conversations past the cursor; all of them for an empty one (the first page)."""
    if not cursor:
        return conversations
    start = position(cursor)
    return conversations.created_after(start.created_at, start.pk)

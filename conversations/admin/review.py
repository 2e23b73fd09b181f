"""Review only: who may review transcripts and read their text, and the mixin that keeps them
unedited."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import get_permission_codename
from django.db.models import Model
from django.http import HttpRequest

from conversations.models import Conversation


def can_review(request: HttpRequest) -> bool:
    opts = Conversation._meta
    return request.user.has_perm(f"{opts.app_label}.{get_permission_codename('view', opts)}")


def can_read_text(request: HttpRequest, conversation: Conversation | None = None) -> bool:
    """Whether the reviewer sees what was written (messages, the system prompt): yes while
    CHAT_STAFF_CAN_READ holds; otherwise only superusers, and owners in their own conversation."""
    if settings.CHAT_STAFF_CAN_READ or request.user.is_superuser:
        return True
    return conversation is not None and conversation.owner_id == request.user.pk


TEXT_HIDDEN = "(hidden: staff do not read conversations here, CHAT_STAFF_CAN_READ)"


class ReadOnlyMixin:
    """Review only: a transcript is a record of what was said, so nobody edits or deletes it here."""

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

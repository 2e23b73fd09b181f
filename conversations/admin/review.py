"""Review only: who may review transcripts and read their text, the mixin that keeps them
unedited, and the conversation's admin page as CHAT_STAFF_CAN_READ has it."""

from __future__ import annotations

from typing import Any, cast

from django.conf import settings
from django.contrib import admin
from django.contrib.auth import get_permission_codename
from django.db.models import Model
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from conversations.models import Conversation
from conversations.services import audit


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


class StaffReadingAdmin(ReadOnlyMixin, admin.ModelAdmin[Conversation]):
    """A conversation's admin page read as CHAT_STAFF_CAN_READ says: its `hidden_unread` fields
    left out for a reviewer who may not read, each view of another person's conversation in the
    audit log, and "View on site" (the chat page, its owner's alone: anyone else would get a
    404) offered to its owner only."""

    hidden_unread: tuple[str, ...] = ()

    def get_fields(self, request: HttpRequest, obj: Conversation | None = None) -> Any:
        fields = super().get_fields(request, obj)
        if can_read_text(request, obj):
            return fields
        return tuple(field for field in fields if field not in self.hidden_unread)

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Conversation | None = None,
    ) -> HttpResponse:
        response = super().render_change_form(request, context, add, change, form_url, obj)
        if obj is not None:
            audit.staff_view(
                request, obj, what="admin page", text_shown=can_read_text(request, obj)
            )
            context_data = cast(TemplateResponse, response).context_data
            if obj.owner_id != request.user.pk and context_data is not None:
                context_data["has_absolute_url"] = False
        return response

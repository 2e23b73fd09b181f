"""Review only: who may review transcripts, and the mixin that keeps them unedited."""

from __future__ import annotations

from django.contrib.auth import get_permission_codename
from django.db.models import Model
from django.http import HttpRequest

from conversations.models import Conversation


def can_review(request: HttpRequest) -> bool:
    opts = Conversation._meta
    return request.user.has_perm(f"{opts.app_label}.{get_permission_codename('view', opts)}")


class ReadOnlyMixin:
    """Review only: a transcript is a record of what was said, so nobody edits or deletes it here."""

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

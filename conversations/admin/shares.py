"""Share links, read-only: revoking is the one change allowed."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import Model, QuerySet
from django.http import HttpRequest

from conversations.models import ShareLink
from conversations.services.shares import share_revoke


@admin.register(ShareLink)
class ShareLinkAdmin(admin.ModelAdmin[ShareLink]):
    """Every share link, read-only; revoking (the action) is the one change allowed."""

    list_display = ("conversation", "created_by", "created_at", "revoked_at")
    list_filter = (
        ("revoked_at", admin.EmptyFieldListFilter),
        ("created_at", admin.DateFieldListFilter),
    )
    list_select_related = ("conversation", "created_by")
    fields = ("conversation", "created_by", "title", "message_count", "created_at", "revoked_at")
    readonly_fields = fields
    actions = ("revoke",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # links are made by their owners, who alone see the link once

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False  # revoke instead: the row records that the link existed

    @admin.display(description="Messages")
    def message_count(self, share: ShareLink) -> int:
        return share.message_count  # kept on the link: a revoked link's snapshot may be gone

    @admin.action(description="Revoke the selected share links", permissions=["change"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[ShareLink]) -> None:
        revoked = sum(share_revoke(share=share) for share in queryset)
        self.message_user(request, f"{revoked} link{'s' if revoked != 1 else ''} revoked.")

"""Budgets and the token ledger in the admin: staff with the permissions set a user's or a group's
tokens a day and a month; the ledger (what each user's replies and titles used, a row a day and
model) can be read and filtered, never changed: budgets and totals are computed from it."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from conversations.models import Budget, TokenUsage


@admin.register(Budget)
class BudgetAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["__str__", "tokens_per_day", "tokens_per_month"]
    autocomplete_fields = ["user", "group"]
    search_fields = ["user__username", "group__name"]


@admin.register(TokenUsage)
class TokenUsageAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = [
        "day",
        "user",
        "model_slug",
        "replies",
        "cancelled",
        "titles",
        "prompt_tokens",
        "completion_tokens",
    ]
    list_filter = ["day", "model_slug"]
    search_fields = ["user__username"]
    date_hierarchy = "day"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

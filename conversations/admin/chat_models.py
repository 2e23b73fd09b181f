"""The models users can pick, managed here besides those declared in CHAT_MODELS."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest, HttpResponse

from conversations.engines import catalogue, specs
from conversations.models import ChatModel


class ChatModelForm(forms.ModelForm[ChatModel]):
    class Meta:
        model = ChatModel
        fields = (
            "name",
            "slug",
            "backend",
            "model_id",
            "options",
            "context_tokens",
            "system_prompt",
            "temperature",
            "max_tokens",
            "max_temperature",
            "max_tokens_limit",
            "groups",
            "enabled",
            "vision",
            "tools",
            "position",
            "price_prompt_per_million",
            "price_completion_per_million",
        )

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        slug = cleaned.get("slug")
        if slug and slug in {spec.slug for spec in specs.declared_models()}:
            self.add_error("slug", "A model declared in CHAT_MODELS has this slug.")
        if not self.errors:
            row = ChatModel(**{k: v for k, v in cleaned.items() if k != "groups"})
            for problem in specs.spec_problems(catalogue.spec_of(row)):
                self.add_error(None, problem[0].upper() + problem[1:] + ".")
        return cleaned


@admin.register(ChatModel)
class ChatModelAdmin(admin.ModelAdmin[ChatModel]):
    """Models users can pick, besides those declared in CHAT_MODELS (listed on the page)."""

    form = ChatModelForm
    list_display = ("name", "slug", "backend", "model_id", "enabled", "position")
    list_editable = ("enabled", "position")
    list_filter = ("backend", "enabled")
    filter_horizontal = ("groups",)
    search_fields = ("name", "slug", "model_id")

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        declared = specs.declared_models()
        return super().changelist_view(request, {**(extra_context or {}), "declared": declared})

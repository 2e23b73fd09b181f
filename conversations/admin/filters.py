"""The conversation list's filters on what its messages hold."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import Exists, OuterRef, QuerySet
from django.http import HttpRequest

from conversations.models import Conversation, Message


class AnyMessageStatusFilter(admin.SimpleListFilter):
    title = "message status"
    parameter_name = "status"

    def lookups(
        self, request: HttpRequest, model_admin: admin.ModelAdmin[Conversation]
    ) -> list[tuple[str, str]]:
        return Message.Status.choices

    def queryset(
        self, request: HttpRequest, queryset: QuerySet[Conversation]
    ) -> QuerySet[Conversation]:
        if not self.value():
            return queryset
        if self.value() not in Message.Status.values:
            return queryset.none()  # a made-up status (NUL bytes included) matches nothing
        matching = Message.objects.filter(conversation=OuterRef("pk"), status=self.value())
        return queryset.filter(Exists(matching))


class EngineFilter(admin.SimpleListFilter):
    title = "engine"
    parameter_name = "engine"

    def lookups(
        self, request: HttpRequest, model_admin: admin.ModelAdmin[Conversation]
    ) -> list[tuple[str, str]]:
        engines = (
            Message.objects.exclude(engine="").order_by("engine").values_list("engine", flat=True)
        )
        return [(name, name) for name in engines.distinct()]

    def queryset(
        self, request: HttpRequest, queryset: QuerySet[Conversation]
    ) -> QuerySet[Conversation]:
        value = self.value()
        if not value:
            return queryset
        if "\x00" in value:
            return queryset.none()  # PostgreSQL cannot even compare text with NUL in it
        matching = Message.objects.filter(conversation=OuterRef("pk"), engine=value)
        return queryset.filter(Exists(matching))

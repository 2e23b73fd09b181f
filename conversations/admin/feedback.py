"""Feedback on replies in the admin: the ratings, filtered by rating, model and date, each model's
approval share (ups among the rated replies) over what the filters keep, and the rated replies
as JSONL for evaluation. Nothing here changes a rating: they are their owners'."""

from __future__ import annotations

import json
from typing import Any, cast

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.text import Truncator
from rest_framework.utils.encoders import JSONEncoder

from conversations.admin.review import TEXT_HIDDEN, ReadOnlyMixin, can_read_text
from conversations.api.exports import JSONL_CONTENT_TYPE
from conversations.models import Feedback
from conversations.services import audit
from conversations.services.feedback import evaluation_record

EXCERPT_CHARS = 120


@admin.register(Feedback)
class FeedbackAdmin(ReadOnlyMixin, admin.ModelAdmin[Feedback]):
    list_display = (
        "updated_at",
        "rating",
        "model_slug",
        "owner",
        "reason_excerpt",
        "reply_excerpt",
    )
    list_filter = ("rating", "model_slug", ("created_at", admin.DateFieldListFilter))
    search_fields = ("owner__username", "model_slug")
    list_select_related = ("owner", "message")
    fields = ("message", "owner", "rating", "reason", "model_slug", "settings", "created_at")
    readonly_fields = fields
    actions = ["export_jsonl"]
    change_list_template = "admin/conversations/feedback/change_list.html"

    def get_list_display(self, request: HttpRequest) -> Any:
        # Where staff do not read conversations (CHAT_STAFF_CAN_READ), the texts stay hidden:
        # the ratings and their models still count.
        if can_read_text(request):
            return self.list_display
        return tuple(f for f in self.list_display if f not in ("reason_excerpt", "reply_excerpt"))

    def get_fields(self, request: HttpRequest, obj: Feedback | None = None) -> Any:
        if obj is None or can_read_text(request, obj.message.conversation):
            return self.fields
        return tuple(f for f in self.fields if f not in ("reason", "settings"))

    @admin.display(description="Reason")
    def reason_excerpt(self, feedback: Feedback) -> str:
        return Truncator(feedback.reason).chars(EXCERPT_CHARS)

    @admin.display(description="Reply")
    def reply_excerpt(self, feedback: Feedback) -> str:
        return Truncator(feedback.message.content).chars(EXCERPT_CHARS)

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        response = super().changelist_view(request, extra_context)
        context = getattr(response, "context_data", None)
        if isinstance(response, TemplateResponse) and context and "cl" in context:
            # The share of each model over the ratings the filters keep (a period, a model).
            rated = cast(QuerySet[Feedback], context["cl"].queryset)
            context["approval"] = Feedback.objects.filter(
                pk__in=rated.values("pk")
            ).approval_by_model()
        return response

    @admin.action(description="Export selected rated replies as JSONL", permissions=["view"])
    def export_jsonl(
        self, request: HttpRequest, queryset: QuerySet[Feedback]
    ) -> HttpResponse | None:
        if not can_read_text(request):
            self.message_user(request, TEXT_HIDDEN, level="error")
            return None
        rows = queryset.select_related("message__conversation").order_by("pk")
        lines = []
        seen: set[object] = set()
        for feedback in rows:
            conversation = feedback.message.conversation
            if conversation.pk not in seen:  # each other person's conversation read is a view
                seen.add(conversation.pk)
                audit.staff_view(request, conversation, what="feedback export", text_shown=True)
            lines.append(
                json.dumps(evaluation_record(feedback), cls=JSONEncoder, ensure_ascii=False)
            )
        name = f"feedback-{timezone.now():%Y%m%d-%H%M%S}.jsonl"
        return HttpResponse(
            "".join(line + "\n" for line in lines).encode(),
            content_type=JSONL_CONTENT_TYPE,
            headers={"Content-Disposition": f'attachment; filename="{name}"'},
        )

"""The conversations' admin: a list with each one's stats, a transcript page, and exports."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict, cast

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html

from conversations import search
from conversations.admin.filters import AnyMessageStatusFilter, EngineFilter
from conversations.admin.messages import MessageInline
from conversations.admin.review import TEXT_HIDDEN, StaffReadingAdmin, can_read_text
from conversations.api import exports, transcripts
from conversations.models import Conversation, ConversationQuerySet
from conversations.services import audit, branches


class Stats(TypedDict):
    """What ConversationQuerySet.with_stats() adds to each row."""

    message_count: int
    last_status: str | None
    last_engine: str | None
    last_model: str | None


if TYPE_CHECKING:  # WithAnnotations takes the TypedDict only when type checking
    from django_stubs_ext import WithAnnotations

    ConversationWithStats = WithAnnotations[Conversation, Stats]


def as_conversations(queryset: QuerySet[Conversation]) -> ConversationQuerySet:
    # The admin's querysets come from the default manager, ConversationQuerySet.as_manager(),
    # though django-stubs only knows them as QuerySet[Conversation].
    return cast(ConversationQuerySet, queryset)


@admin.register(Conversation)
class ConversationAdmin(StaffReadingAdmin):
    list_display = (
        "__str__",
        "owner",
        "created_at",
        "updated_at",
        "message_count",
        "last_status",
        "last_engine",
        "last_model",
        "transcript_link",
    )
    list_filter = (
        ("owner", admin.RelatedOnlyFieldListFilter),
        AnyMessageStatusFilter,
        EngineFilter,
        "origin",  # the chat page, the API gateway (origin_detail: its client), an import
        ("created_at", admin.DateFieldListFilter),
    )
    list_select_related = ("owner",)
    date_hierarchy = "created_at"
    # The search itself is the page's and the API's (conversations.search), see below.
    search_fields = ("title",)
    search_help_text = (
        "Searches titles and message text (titles only where CHAT_STAFF_CAN_READ is off): whole "
        'words, the last one also as the start of a word, "a phrase", -without (on PostgreSQL; '
        "any part of the text on SQLite)."
    )
    fields = (
        "id",
        "owner",
        "title",
        "title_is_custom",
        "model_slug",
        "system_prompt",
        "temperature",
        "max_tokens",
        "origin",
        "origin_detail",
        "api_token",  # the gateway call's token that started it
        "created_at",
        "updated_at",
    )
    readonly_fields = fields
    hidden_unread = ("system_prompt",)
    inlines = (MessageInline,)
    actions = ("export_json", "export_markdown")

    def get_queryset(self, request: HttpRequest) -> ConversationQuerySet:
        return as_conversations(super().get_queryset(request)).with_stats()

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Conversation], search_term: str
    ) -> tuple[QuerySet[Conversation], bool]:
        if not can_read_text(request):
            # Finding a conversation by a word of it would read it: titles only.
            return super().get_search_results(request, queryset, search_term)
        # An Exists subquery, so no duplicate rows and no DISTINCT over the annotations.
        try:
            return search.filter_matching(as_conversations(queryset), search_term), False
        except search.FilterError as exc:
            self.message_user(request, str(exc), level="error")
            return queryset.none(), False

    @admin.display(description="Messages", ordering="message_count")
    def message_count(self, conversation: ConversationWithStats) -> int:
        return conversation.message_count

    @admin.display(description="Last status", ordering="last_status")
    def last_status(self, conversation: ConversationWithStats) -> str:
        return conversation.last_status or "-"

    @admin.display(description="Engine", ordering="last_engine")
    def last_engine(self, conversation: ConversationWithStats) -> str:
        return conversation.last_engine or "-"

    @admin.display(description="Model", ordering="last_model")
    def last_model(self, conversation: ConversationWithStats) -> str:
        return conversation.last_model or "-"

    @admin.display(description="Transcript")
    def transcript_link(self, conversation: Conversation) -> str:
        url = reverse("admin:conversations_conversation_transcript", args=[conversation.pk])
        return format_html('<a href="{}">read</a>', url)

    def get_urls(self) -> list[URLPattern]:
        transcript = path(
            "<path:object_id>/transcript/",
            self.admin_site.admin_view(self.transcript_view),
            name="conversations_conversation_transcript",
        )
        return [transcript, *super().get_urls()]

    def transcript_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """The conversation as one reads it; ?download=json|markdown|txt saves it as a file."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        conversation = self.get_object(request, object_id)
        if conversation is None:
            raise Http404("No such conversation.")
        readable = can_read_text(request, conversation)
        fmt = request.GET.get("download")
        if fmt in exports.FORMATS:
            if not readable:
                raise PermissionDenied(TEXT_HIDDEN)
            audit.staff_view(request, conversation, what=f"download ({fmt})", text_shown=True)
            one = Conversation.objects.filter(pk=conversation.pk)
            return self._download(one, fmt, str(conversation), many=False)
        audit.staff_view(request, conversation, what="transcript", text_shown=readable)
        # Every message, in order, each saying where it stands: on the branch its owner sees, or
        # another version of its turn.
        messages = branches.place_all(
            list(conversation.messages.order_by("created_at", "id")), conversation.current_leaf_id
        )
        branches.with_attachments(messages)  # named, as the owner's page names them
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": f"Transcript: {conversation}",
            "conversation": conversation,
            "entries": [(m, transcripts.stop_note(m)) for m in messages],
            "formats": list(exports.FORMATS) if readable else [],
            "text_hidden": "" if readable else TEXT_HIDDEN,
        }
        return TemplateResponse(
            request, "admin/conversations/conversation/transcript.html", context
        )

    @admin.action(description="Export selected conversations as JSON", permissions=["view"])
    def export_json(
        self, request: HttpRequest, queryset: QuerySet[Conversation]
    ) -> HttpResponse | None:
        return self._export(request, queryset, "json")

    @admin.action(description="Export selected conversations as Markdown", permissions=["view"])
    def export_markdown(
        self, request: HttpRequest, queryset: QuerySet[Conversation]
    ) -> HttpResponse | None:
        return self._export(request, queryset, "markdown")

    def _export(
        self, request: HttpRequest, queryset: QuerySet[Conversation], fmt: str
    ) -> HttpResponse | None:
        if not can_read_text(request):
            self.message_user(request, TEXT_HIDDEN, level="error")
            return None
        # Each other person's conversation in the file is a view of it, as on its own page.
        for conversation in queryset.select_related("owner"):
            audit.staff_view(request, conversation, what=f"export ({fmt})", text_shown=True)
        return self._download(queryset, fmt, f"conversations-{timezone.now():%Y%m%d-%H%M%S}")

    def _download(
        self, queryset: QuerySet[Conversation], fmt: str, stem: str, *, many: bool = True
    ) -> HttpResponse:
        conversations = exports.with_messages(as_conversations(queryset).newest_first())
        return exports.download(exports.render(conversations, fmt, many=many), fmt, stem=stem)

"""History review: read-only conversations with their messages, transcripts and exports.

Nothing here can edit a transcript. Staff who are not superusers see it only with the view
permission on conversations (conversations.view_conversation), which brings the messages with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict, cast

from django import forms
from django.contrib import admin
from django.contrib.auth import get_permission_codename
from django.core.exceptions import PermissionDenied
from django.db.models import Exists, Model, OuterRef, QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from conversations import search
from conversations.api import exports
from conversations.engines import catalogue, specs
from conversations.models import (
    ChatModel,
    Conversation,
    ConversationQuerySet,
    Message,
    ShareLink,
)
from conversations.services import branches
from conversations.services.shares import share_revoke


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


class MessageInline(ReadOnlyMixin, admin.TabularInline[Message, Conversation]):
    model = Message
    extra = 0
    ordering = ("created_at", "id")
    fields = ("created_at", "role", "status", "branch", "content", "source", "metrics", "audit")
    readonly_fields = fields

    def has_view_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        # Messages are part of the conversation: its view permission is the one that counts.
        return can_review(request)

    @admin.display(description="Branch")
    def branch(self, message: Message) -> str:
        """Whether its owner sees it, or it is another version of its turn (regenerated,
        edited, continued); its parent, the message it follows."""
        version, shown = self._tree(message.conversation).get(message.pk, (None, True))
        count = (
            f"version {version.index} of {version.count}, " if version and version.count > 1 else ""
        )
        parent = f"; follows #{message.parent_id}" if message.parent_id else ""
        return f"#{message.pk}: {count}{'shown' if shown else 'not shown'}{parent}"

    def _tree(self, conversation: Conversation) -> dict[int, tuple[Any, bool]]:
        """Each message's version and whether it is shown, worked out once per conversation
        (this inline is made anew for each request)."""
        cache: dict[Any, dict[int, tuple[Any, bool]]] = self.__dict__.setdefault("_trees", {})
        if conversation.pk not in cache:
            messages = branches.place_all(
                list(conversation.messages.order_by("created_at", "id")),
                conversation.current_leaf_id,
            )
            cache[conversation.pk] = {m.pk: (m.version, bool(m.is_current)) for m in messages}
        return cache[conversation.pk]

    @admin.display(description="Engine / model / request")
    def source(self, message: Message) -> SafeString:
        return render_to_string("admin/conversations/message_source.html", {"m": message})

    @admin.display(description="Metrics")
    def metrics(self, message: Message) -> SafeString:
        return render_to_string("admin/conversations/message_metrics.html", {"m": message})

    @admin.display(description="Stop audit")
    def audit(self, message: Message) -> SafeString:
        return render_to_string("admin/conversations/message_audit.html", {"m": message})


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


@admin.register(Conversation)
class ConversationAdmin(ReadOnlyMixin, admin.ModelAdmin[Conversation]):
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
        "Searches titles and message text: whole words, the last one also as the start of a "
        'word, "a phrase", -without (on PostgreSQL; any part of the text on SQLite).'
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
        "created_at",
        "updated_at",
    )
    readonly_fields = fields
    inlines = (MessageInline,)
    actions = ("export_json", "export_markdown")

    def get_queryset(self, request: HttpRequest) -> ConversationQuerySet:
        return as_conversations(super().get_queryset(request)).with_stats()

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Conversation], search_term: str
    ) -> tuple[QuerySet[Conversation], bool]:
        # An Exists subquery, so no duplicate rows and no DISTINCT over the annotations.
        return search.filter_matching(as_conversations(queryset), search_term), False

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
        fmt = request.GET.get("download")
        if fmt in exports.FORMATS:
            one = Conversation.objects.filter(pk=conversation.pk)
            return self._download(one, fmt, str(conversation), many=False)
        # Every message, in order, each saying where it stands: on the branch its owner sees, or
        # another version of its turn.
        messages = branches.place_all(
            list(conversation.messages.order_by("created_at", "id")), conversation.current_leaf_id
        )
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": f"Transcript: {conversation}",
            "conversation": conversation,
            "entries": [(m, exports.stop_note(m)) for m in messages],
            "formats": list(exports.FORMATS),
        }
        return TemplateResponse(
            request, "admin/conversations/conversation/transcript.html", context
        )

    @admin.action(description="Export selected conversations as JSON", permissions=["view"])
    def export_json(self, request: HttpRequest, queryset: QuerySet[Conversation]) -> HttpResponse:
        return self._download(queryset, "json", f"conversations-{timezone.now():%Y%m%d-%H%M%S}")

    @admin.action(description="Export selected conversations as Markdown", permissions=["view"])
    def export_markdown(
        self, request: HttpRequest, queryset: QuerySet[Conversation]
    ) -> HttpResponse:
        return self._download(queryset, "markdown", f"conversations-{timezone.now():%Y%m%d-%H%M%S}")

    def _download(
        self, queryset: QuerySet[Conversation], fmt: str, stem: str, *, many: bool = True
    ) -> HttpResponse:
        conversations = exports.with_messages(as_conversations(queryset).newest_first())
        return exports.download(exports.render(conversations, fmt, many=many), fmt, stem=stem)


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
            "position",
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
        return share.message_count

    @admin.action(description="Revoke the selected share links", permissions=["change"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[ShareLink]) -> None:
        revoked = sum(share_revoke(share=share) for share in queryset)
        self.message_user(request, f"{revoked} link{'s' if revoked != 1 else ''} revoked.")

"""A conversation's messages in its admin page: each one's branch, source, metrics and Stop audit."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import Model
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.utils.safestring import SafeString

from conversations.admin.review import ReadOnlyMixin, can_read_text, can_review
from conversations.models import Conversation, Message
from conversations.services import branches


class MessageInline(ReadOnlyMixin, admin.TabularInline[Message, Conversation]):
    model = Message
    extra = 0
    ordering = ("created_at", "id")
    fields = ("created_at", "role", "status", "branch", "content", "source", "metrics", "audit")
    # Where the reviewer may not read (CHAT_STAFF_CAN_READ): no content, no system prompt.
    unread_fields = tuple(
        {"source": "source_unread"}.get(field, field) for field in fields if field != "content"
    )
    readonly_fields = (*fields, "source_unread")

    def has_view_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        # Messages are part of the conversation: its view permission is the one that counts.
        return can_review(request)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return self.fields if can_read_text(request, obj) else self.unread_fields

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

    @admin.display(description="Engine / model / request")
    def source_unread(self, message: Message) -> SafeString:
        context = {"m": message, "prompt_hidden": True}
        return render_to_string("admin/conversations/message_source.html", context)

    @admin.display(description="Metrics")
    def metrics(self, message: Message) -> SafeString:
        return render_to_string("admin/conversations/message_metrics.html", {"m": message})

    @admin.display(description="Stop audit")
    def audit(self, message: Message) -> SafeString:
        return render_to_string("admin/conversations/message_audit.html", {"m": message})

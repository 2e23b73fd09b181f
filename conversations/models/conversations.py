"""Conversations: a user's chats, and the queries the sidebar, the API and the admin make of them."""

import uuid
from datetime import datetime

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.functions import Coalesce
from django.urls import reverse
from django.utils.translation import gettext

from conversations.models.messages import Message
from conversations.types import AnyUser


class ConversationQuerySet(models.QuerySet["Conversation"]):
    def visible_to(self, user: AnyUser) -> "ConversationQuerySet":
        if not user.is_authenticated:
            return self.none()
        return self.filter(owner=user)

    def in_range(
        self, since: datetime | None = None, until: datetime | None = None
    ) -> "ConversationQuerySet":
        """Conversations last active in [since, until); either bound may be None."""
        queryset = self
        if since is not None:
            queryset = queryset.filter(updated_at__gte=since)
        if until is not None:
            queryset = queryset.filter(updated_at__lt=until)
        return queryset

    def with_messages_or(self, keep: uuid.UUID | None = None) -> "ConversationQuerySet":
        """Conversations with at least one message, and `keep` (the one open) even if empty:
        a conversation opened and left unused does not pile up in the sidebar."""
        has_messages = models.Exists(Message.objects.filter(conversation=models.OuterRef("pk")))
        return self.filter(has_messages | Q(pk=keep)) if keep else self.filter(has_messages)

    def empty(self) -> "ConversationQuerySet":
        return self.exclude(
            models.Exists(Message.objects.filter(conversation=models.OuterRef("pk")))
        )

    def newest_first(self) -> "ConversationQuerySet":
        # The primary key breaks ties so that pages never repeat or skip a row.
        return self.order_by("-updated_at", "-pk")

    def oldest_created_first(self) -> "ConversationQuerySet":
        """A total order that no write changes, for keyset pages: neither field ever changes
        (updated_at moves with every message), and the primary key breaks ties."""
        return self.order_by("created_at", "pk")

    def created_after(self, created_at: datetime, pk: uuid.UUID) -> "ConversationQuerySet":
        """Conversations after (created_at, pk) in oldest_created_first's order."""
        return self.filter(Q(created_at__gt=created_at) | Q(created_at=created_at, pk__gt=pk))

    def with_stats(self) -> "ConversationQuerySet":
        """Annotates message_count and the last reply's last_status, last_engine, last_model."""
        # Subqueries rather than a join with COUNT: a join would multiply with any other join
        # (a search, a filter on messages) and GROUP BY every selected column.
        messages = Message.objects.filter(conversation=models.OuterRef("pk")).order_by()
        count = messages.values("conversation").annotate(n=models.Count("pk")).values("n")
        last = messages.exclude(engine="").order_by("-created_at", "-id")
        return self.annotate(
            message_count=Coalesce(models.Subquery(count), 0),
            last_status=models.Subquery(last.values("status")[:1]),
            last_engine=models.Subquery(last.values("engine")[:1]),
            last_model=models.Subquery(last.values("model")[:1]),
        )


class Conversation(models.Model):
    class Origin(models.TextChoices):
        CHAT = "chat"
        API = "api", "API"
        IMPORT = "import"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="conversations"
    )
    title = models.CharField(max_length=200, blank=True)
    # False until someone renames it; until then the first message gives the title.
    title_is_custom = models.BooleanField(default=False)
    # The model its next reply uses (a slug of conversations.engines.catalogue; empty: the owner's
    # default) and its own settings within that model's bounds (null: the model's default).
    model_slug = models.CharField(max_length=50, blank=True)
    # null and "" differ here: the model's default prompt, or none at all.
    system_prompt = models.TextField(null=True, blank=True)  # noqa: DJ001
    temperature = models.FloatField(null=True, blank=True)
    max_tokens = models.PositiveIntegerField(null=True, blank=True)
    # The last message of the branch shown and sent to the model (see services.branches); null
    # for an empty conversation.
    current_leaf = models.ForeignKey(
        "Message", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Where it came from: the chat page, the OpenAI-compatible gateway, or an import. For an
    # import, created_at and updated_at (and its messages' created_at) keep the source's times.
    origin = models.CharField(max_length=16, choices=Origin.choices, default=Origin.CHAT)
    # The gateway client's User-Agent, or the import's format ("chatgpt", "claude", "chatsite").
    origin_detail = models.CharField(max_length=300, blank=True)
    # The API token whose gateway call started it: only that token's calls continue it without
    # naming it (gateway.continuation).
    api_token = models.ForeignKey(
        "ApiToken", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The conversation's id in the source it was imported from: importing it again skips it.
    external_id = models.CharField(max_length=200, blank=True)
    imported_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # Organisation: pinned ones head the sidebar, archived ones leave it (for the Archive page),
    # and a project's are listed under it. None of these moves updated_at.
    pinned = models.BooleanField(default=False)
    archived = models.BooleanField(default=False)
    project = models.ForeignKey(
        "Project", null=True, blank=True, on_delete=models.SET_NULL, related_name="conversations"
    )
    # Started as a temporary chat: deleted once its last reply has ended and no tab is open on
    # it (generation.temporary); its usage and audit rows stay, as for any deleted conversation.
    temporary = models.BooleanField(default=False)

    objects = ConversationQuerySet.as_manager()

    class Meta:
        ordering = ["-updated_at"]
        indexes = [models.Index(fields=["owner", "-updated_at"])]
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "origin_detail", "external_id"],
                condition=~Q(external_id=""),
                name="one_import_per_source_conversation",
            ),
        ]

    def __str__(self) -> str:
        return self.title or gettext("New conversation")

    def get_absolute_url(self) -> str:
        return reverse("conversation-detail", kwargs={"conversation_id": self.id})

    # A conversation untitled by its owner or its model is named by the first words of its first
    # message (a send, an API call, an import without a title): on one line, this many characters.
    FIRST_WORDS_CHARS = 80

    @classmethod
    def first_words(cls, text: str) -> str:
        return " ".join(text.split())[: cls.FIRST_WORDS_CHARS]

    @property
    def group_name(self) -> str:
        """The channel-layer group of this conversation's tabs (its generation's: see broadcast)."""
        return f"conversation.{self.id.hex}"

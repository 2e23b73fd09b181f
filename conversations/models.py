import uuid
from collections.abc import Iterable
from datetime import datetime
from typing import Any, ClassVar

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.functions import Coalesce
from django.urls import reverse

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


class ChatModel(models.Model):
    """A model users can chat with, managed in the admin (more can be declared in CHAT_MODELS:
    see conversations.engines.catalogue, which turns a row into the same ModelSpec)."""

    slug = models.SlugField(max_length=50, unique=True, help_text="Its name in the API and URLs.")
    name = models.CharField(max_length=100, help_text="The name users see in the picker.")
    backend = models.CharField(max_length=32, help_text="The engine: llamacpp, openai, vllm...")
    model_id = models.CharField(
        max_length=300,
        blank=True,
        help_text="The engine's name for the model: a GGUF path (llamacpp; empty: the embedded "
        "one), a served model (openai; empty: the first the server lists), a model id (vllm).",
    )
    options = models.JSONField(
        default=dict,
        blank=True,
        help_text='The backend\'s settings, e.g. {"base_url": "http://vllm:8000/v1", '
        '"api_key_env": "UPSTREAM_KEY"}. Secrets are named by environment variable, never stored.',
    )
    context_tokens = models.PositiveIntegerField(default=2048)
    system_prompt = models.TextField(blank=True, help_text="The default for new conversations.")
    temperature = models.FloatField(default=0.7)
    max_tokens = models.PositiveIntegerField(default=512, help_text="Default reply length.")
    max_temperature = models.FloatField(default=2.0, help_text="The most a conversation may set.")
    max_tokens_limit = models.PositiveIntegerField(
        default=4096, help_text="The longest reply a conversation may ask for."
    )
    groups = models.ManyToManyField(
        "auth.Group", blank=True, help_text="Who may use it; nobody chosen: everyone signed in."
    )
    enabled = models.BooleanField(default=True)
    position = models.PositiveIntegerField(default=0, help_text="Order in the picker.")

    class Meta:
        ordering = ["position", "name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.slug})"


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
    # The conversation's id in the source it was imported from: importing it again skips it.
    external_id = models.CharField(max_length=200, blank=True)
    imported_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

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
        return self.title or "New conversation"

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


class MessageQuerySet(models.QuerySet["Message"]):
    def active(self) -> "MessageQuerySet":
        return self.filter(status__in=Message.ACTIVE_STATUSES)

    def transition(
        self,
        pk: int | None = None,
        *,
        from_: Iterable["Message.Status"],
        to: "Message.Status | None",
        **fields: Any,
    ) -> int:
        """Move replies in one of the `from_` statuses to `to`; return how many moved.

        Every change of a reply's status goes through here. It is one conditional UPDATE, so
        when two writers race (a finish and a recovery, two processes) exactly one wins, and
        the loser sees 0 and acts on it. `to=None` writes fields without changing the status,
        for a row that must still be in one of `from_` (a flush, a recorded Stop).
        `pk` narrows it to one reply; without it every matching row of the queryset moves.
        """
        sources = set(from_)
        for source in sources:
            allowed = Message.TRANSITIONS[source]
            if (to is not None and to not in allowed) or (
                to is None and source not in Message.ACTIVE_STATUSES
            ):
                raise ValueError(f"A reply cannot go from {source} to {to or 'itself'}.")
        rows = self if pk is None else self.filter(pk=pk)
        if to is not None:
            fields["status"] = to
        return rows.filter(status__in=sources).update(**fields)


class Message(models.Model):
    class Role(models.TextChoices):
        USER = "user"
        ASSISTANT = "assistant"

    class Status(models.TextChoices):
        PENDING = "pending"
        STREAMING = "streaming"
        COMPLETE = "complete"
        CANCELLED = "cancelled"
        ERROR = "error"
        INTERRUPTED = "interrupted"

    ACTIVE_STATUSES = (Status.PENDING, Status.STREAMING)
    # The only status changes a reply may make (see MessageQuerySet.transition); the settled
    # statuses are final. Writes that keep an active status (flushes) are allowed too.
    TRANSITIONS: ClassVar[dict[str, frozenset[str]]] = {
        Status.PENDING: frozenset(
            {Status.STREAMING, Status.COMPLETE, Status.CANCELLED, Status.ERROR, Status.INTERRUPTED}
        ),
        Status.STREAMING: frozenset(
            {Status.COMPLETE, Status.CANCELLED, Status.ERROR, Status.INTERRUPTED}
        ),
        Status.COMPLETE: frozenset(),
        Status.CANCELLED: frozenset(),
        Status.ERROR: frozenset(),
        # Only a live generation whose final save outlasted a database outage, after recovery
        # took its row for a dead process's (generation.rows.finish, retrying).
        Status.INTERRUPTED: frozenset({Status.COMPLETE, Status.CANCELLED, Status.ERROR}),
    }

    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="messages"
    )
    # The message this one answers or follows; null for a conversation's first. Messages with
    # the same parent are versions of one turn (a regenerated reply, an edited question).
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="children"
    )
    role = models.CharField(max_length=16, choices=Role.choices)
    content = models.TextField(blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.COMPLETE)

    engine = models.CharField(max_length=32, blank=True)
    model = models.CharField(max_length=200, blank=True)
    # What the reply was generated with: the chat model's slug and the settings used.
    model_slug = models.CharField(max_length=50, blank=True)
    system_prompt = models.TextField(blank=True)
    temperature = models.FloatField(null=True, blank=True)
    max_tokens = models.PositiveIntegerField(null=True, blank=True)
    request_id = models.CharField(max_length=64, blank=True, db_index=True)
    idempotency_key = models.CharField(max_length=64, blank=True)

    created_at = models.DateTimeField(auto_now_add=True)
    # When the engine could take the request: its model loaded (a first reply after start-up
    # may wait minutes for that). Time to first token counts from here.
    engine_ready_at = models.DateTimeField(null=True, blank=True)
    first_token_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Refreshed by the live generation; a stale heartbeat on an active reply means its process died.
    heartbeat_at = models.DateTimeField(null=True, blank=True)

    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    finish_reason = models.CharField(max_length=32, blank=True)

    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    cancel_confirmed_at = models.DateTimeField(null=True, blank=True)
    cancel_latency_ms = models.FloatField(null=True, blank=True)
    cancelled_by = models.CharField(max_length=150, blank=True)
    error = models.TextField(blank=True)  # what the user is told
    # What went wrong, for operators (server addresses, paths...): the admin shows it, not users.
    error_detail = models.TextField(blank=True)

    objects = MessageQuerySet.as_manager()

    # Where it stands among the versions of its turn, set where a page shows it (not a column):
    # a services.branches.Version.
    version: Any = None
    is_current: bool | None = None  # on the branch shown; set with `version`

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            # The database, not a lock in one process, guarantees one reply at a time per
            # conversation, whichever process the send reached.
            models.UniqueConstraint(
                fields=["conversation"],
                condition=Q(status__in=["pending", "streaming"]),
                name="one_active_reply_per_conversation",
            ),
            models.UniqueConstraint(
                fields=["conversation", "idempotency_key"],
                condition=~Q(idempotency_key=""),
                name="one_message_per_idempotency_key",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.role} message {self.pk} ({self.status})"

    @property
    def is_active(self) -> bool:
        return self.status in self.ACTIVE_STATUSES

    @property
    def can_continue(self) -> bool:
        """A reply with text that ended before the model was done: cut off at the length limit,
        stopped, or interrupted; Continue writes on from its end."""
        if self.role != self.Role.ASSISTANT or self.is_active or not self.content:
            return False
        return self.finish_reason == "length" or self.status in (
            self.Status.CANCELLED,
            self.Status.INTERRUPTED,
        )

    @property
    def ttft_ms(self) -> float | None:
        """From when the engine could start on the reply (not the model's load) to its first token."""
        if self.first_token_at is None:
            return None
        start = self.engine_ready_at or self.created_at
        return (self.first_token_at - start).total_seconds() * 1000

    @property
    def duration_s(self) -> float | None:
        if self.finished_at is None:
            return None
        return (self.finished_at - self.created_at).total_seconds()

    @property
    def tokens_per_second(self) -> float | None:
        if not self.completion_tokens or self.first_token_at is None or self.finished_at is None:
            return None
        seconds = (self.finished_at - self.first_token_at).total_seconds()
        return round(self.completion_tokens / seconds, 2) if seconds > 0 else None


class ApiTokenQuerySet(models.QuerySet["ApiToken"]):
    def active(self) -> "ApiTokenQuerySet":
        return self.filter(revoked_at__isnull=True)

    def owned_by(self, user: AnyUser) -> "ApiTokenQuerySet":
        if not user.is_authenticated:
            return self.none()
        return self.filter(user=user)


class ApiToken(models.Model):
    """A personal key for the REST API, sent as `Authorization: Bearer <key>`.

    Only a hash of the key is stored; the key itself is shown once, when it is created.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100)
    # The first characters of the key, so its owner can tell their keys apart.
    prefix = models.CharField(max_length=16)
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class UserPreferences(models.Model):
    """How the pages look for one user; a user without a row gets the defaults."""

    class Theme(models.TextChoices):
        SYSTEM = "system"  # follow the browser's prefers-color-scheme
        LIGHT = "light"
        DARK = "dark"

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="preferences"
    )
    theme = models.CharField(max_length=8, choices=Theme.choices, default=Theme.SYSTEM)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "user preferences"

    def __str__(self) -> str:
        return f"preferences of user {self.user_id}"


class ShareLinkQuerySet(models.QuerySet["ShareLink"]):
    def active(self) -> "ShareLinkQuerySet":
        return self.filter(revoked_at__isnull=True)

    def owned_by(self, user: AnyUser) -> "ShareLinkQuerySet":
        """Links to the user's own conversations: the ones they may see and revoke."""
        if not user.is_authenticated:
            return self.none()
        return self.filter(conversation__owner=user)


class ShareLink(models.Model):
    """A read-only link to a snapshot of a conversation, as it was when the link was made.

    Only a hash of the link's token is stored; the link itself is shown once, when it is made.
    The snapshot holds the title and, for each message of the branch shown, only what a reader
    sees (see services.shares.SNAPSHOT_FIELDS): later messages, other versions, the owner and
    ids never reach it.
    """

    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="share_links"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="share_links"
    )
    token_hash = models.CharField(max_length=64, unique=True)
    title = models.CharField(max_length=200, blank=True)
    messages = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = ShareLinkQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"share of {self.title or 'New conversation'} ({self.created_at:%Y-%m-%d %H:%M})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    @property
    def message_count(self) -> int:
        return len(self.messages)

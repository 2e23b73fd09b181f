"""Messages: the turns of a conversation, and a reply's status with the only changes it may make."""

from collections.abc import Iterable
from typing import Any, ClassVar

from django.db import models
from django.db.models import Q


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
        TOOL = "tool"  # a tool's result, sent by an API caller (see tool_call_id)

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

    # By name: conversations.py imports this module for its querysets' subqueries.
    conversation = models.ForeignKey(
        "conversations.Conversation", on_delete=models.CASCADE, related_name="messages"
    )
    # The message this one answers or follows; null for a conversation's first. Messages with
    # the same parent are versions of one turn (a regenerated reply, an edited question).
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="children"
    )
    role = models.CharField(max_length=16, choices=Role.choices)
    content = models.TextField(blank=True)
    # What a reasoning model wrote before its answer (an imported Open WebUI reply's thinking),
    # kept apart from the answer: the page shows it collapsed, and it is never sent back to a
    # model as part of the conversation.
    reasoning = models.TextField(blank=True)
    # An assistant message's calls of the caller's tools, in OpenAI's shape (`[{"id", "type":
    # "function", "function": {"name", "arguments"}}]`), and a tool message's call it answers.
    tool_calls = models.JSONField(default=list, blank=True)
    tool_call_id = models.CharField(max_length=100, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.COMPLETE)

    engine = models.CharField(max_length=32, blank=True)
    model = models.CharField(max_length=200, blank=True)
    # What the reply was generated with: the chat model's slug and the settings used.
    model_slug = models.CharField(max_length=50, blank=True)
    # The name users saw the model by when it wrote the reply, for its label ("" before 0028).
    model_name = models.CharField(max_length=100, blank=True)
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
    # A user message's attachments as pages and tabs list them, set where they are shown (one
    # query for a branch: services.branches.with_attachments); None: not looked up.
    shown_attachments: list[Any] | None = None
    # A reply's Feedback from the user looking at it, set where pages show it
    # (services.feedback.with_feedback); None: not rated, or not looked up.
    shown_feedback: Any = None

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

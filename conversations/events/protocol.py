"""Every message that crosses a process boundary: the events of a conversation's two groups.

A conversation's tabs (consumers) and its running generation talk through these events only, in
one namespace, `chat.*`, over two channel-layer groups of the conversation:

- to the tabs' group, from the generation: Started, Delta, Snapshot (to one tab), Finished, Ping;
- to the generation's group, from tabs and services: Cancel, Sync, Pong (Pong to its own channel);
- to the tabs' group of a temporary chat, from whoever would delete it: AnyoneHere, answered Here
  on the asker's own channel.

And one group per API token, which the gateway's calls made with it join: TokenRevoked.

`conversations.events.broadcast` is the only module that puts them on the channel layer; `parse` turns
what arrives back into these classes. Payloads are plain JSON-able values (the Redis layer
serializes with msgpack).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar, TypedDict, TypeVar

from conversations.models import Attachment, Feedback, Message


class FeedbackPayload(TypedDict):
    """Its owner's rating of a reply."""

    rating: str  # "up" or "down"
    reason: str


class AttachmentPayload(TypedDict):
    """A file attached to a user message, as it is listed (its text is for the prompt only)."""

    id: str
    name: str
    kind: str  # its MIME type, judged from its bytes
    size: int  # bytes


class MessagePayload(TypedDict):
    """A message as the socket's JSON protocol shows it; the same fields as the REST API's."""

    id: int
    parent: int | None
    role: str
    content: str
    status: str
    engine: str
    model: str
    model_slug: str
    system_prompt: str
    temperature: float | None
    max_tokens: int | None
    request_id: str
    created_at: str | None
    first_token_at: str | None
    finished_at: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    finish_reason: str
    ttft_ms: float | None
    tokens_per_second: float | None
    duration_s: float | None
    cancel_requested_at: str | None
    cancel_confirmed_at: str | None
    cancel_latency_ms: float | None
    cancelled_by: str
    error: str
    # [index, count, previous_id, next_id] among the versions of its turn, and whether it is on
    # the branch shown; None where not worked out (they cost a query).
    version: list[int | None] | None
    is_current: bool | None
    attachments: list[AttachmentPayload]
    # An assistant message's calls of an API caller's tools (OpenAI's shape), and a tool
    # message's call it answers (see Message.tool_calls).
    tool_calls: list[dict[str, Any]]
    tool_call_id: str
    # The owner's rating of a reply; None when not rated, or not looked up.
    feedback: FeedbackPayload | None


def feedback_payload(message: Message) -> FeedbackPayload | None:
    """A reply's rating where it was looked up: put on it by the page (`shown_feedback`) or
    read with it (`select_related("feedback")`); None otherwise, never a query more."""
    feedback: Feedback | None = message.shown_feedback
    if feedback is None and Message.feedback.is_cached(message):
        feedback = getattr(message, "feedback", None)
    if feedback is None:
        return None
    return FeedbackPayload(rating=feedback.rating, reason=feedback.reason)


def attachment_payload(attachment: Attachment) -> AttachmentPayload:
    return AttachmentPayload(
        id=str(attachment.pk), name=attachment.name, kind=attachment.kind, size=attachment.size
    )


def message_payload(message: Message) -> MessagePayload:
    """The message as tabs and API clients see it; `version` only where it was set on it (see
    services.branches), since it costs a query."""
    return MessagePayload(
        id=message.pk,
        parent=message.parent_id,
        role=message.role,
        content=message.content,
        status=message.status,
        engine=message.engine,
        model=message.model,
        model_slug=message.model_slug,
        system_prompt=message.system_prompt,
        temperature=message.temperature,
        max_tokens=message.max_tokens,
        request_id=message.request_id,
        created_at=_iso(message.created_at),
        first_token_at=_iso(message.first_token_at),
        finished_at=_iso(message.finished_at),
        prompt_tokens=message.prompt_tokens,
        completion_tokens=message.completion_tokens,
        finish_reason=message.finish_reason,
        ttft_ms=message.ttft_ms,
        tokens_per_second=message.tokens_per_second,
        duration_s=message.duration_s,
        cancel_requested_at=_iso(message.cancel_requested_at),
        cancel_confirmed_at=_iso(message.cancel_confirmed_at),
        cancel_latency_ms=message.cancel_latency_ms,
        cancelled_by=message.cancelled_by,
        error=message.error,
        version=message.version.as_list() if message.version is not None else None,
        is_current=message.is_current,
        attachments=[attachment_payload(a) for a in message.shown_attachments or ()],
        tool_calls=list(message.tool_calls or ()),
        tool_call_id=message.tool_call_id,
        feedback=feedback_payload(message),
    )


def _iso(moment: datetime | None) -> str | None:
    """ISO 8601 in UTC with a Z, as the REST API writes times."""
    if moment is None:
        return None
    text = moment.astimezone(UTC).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


@dataclass(frozen=True)
class Event:
    type: ClassVar[str]
    message_id: int | None

    def as_message(self) -> dict[str, Any]:
        return {"type": self.type, **dataclasses.asdict(self)}


# To the tabs.


@dataclass(frozen=True)
class Started(Event):
    """A send was accepted: its user message and the (empty) reply, rendered without a query."""

    type = "chat.started"
    message_id: int
    conversation_id: str
    title: str
    user_message: MessagePayload | None  # None when the turn adds a reply only (regenerate...)
    message: MessagePayload
    model_loading: bool = False  # the reply waits for its model to load (minutes, for some)
    # The message the new ones follow: tabs drop whatever they show after it (an edit or a
    # regenerate starts a new branch there). None: from the start of the conversation.
    after: int | None = None


@dataclass(frozen=True)
class Delta(Event):
    """Reply text from character `offset` on; tabs that see a gap ask for a Snapshot."""

    type = "chat.delta"
    message_id: int
    offset: int
    text: str


@dataclass(frozen=True)
class Snapshot(Event):
    """The reply's text so far, to the one tab that asked (Sync)."""

    type = "chat.snapshot"
    message_id: int
    text: str


@dataclass(frozen=True)
class Finished(Event):
    """The reply is saved in its final state; `message` is that row, so tabs need no query."""

    type = "chat.finished"
    message_id: int
    message: MessagePayload


@dataclass(frozen=True)
class BranchChanged(Event):
    """Another version of a turn is shown now: tabs show the branch ending at `message_id`."""

    type = "chat.branch"
    message_id: int


@dataclass(frozen=True)
class TitleChanged(Event):
    """The model wrote the conversation's title (after its first reply)."""

    type = "chat.title"
    message_id: None
    title: str


@dataclass(frozen=True)
class Ping(Event):
    """Is anyone watching? Tabs showing the reply answer with a Pong to `reply_channel`."""

    type = "chat.ping"
    message_id: int
    reply_channel: str


@dataclass(frozen=True)
class SessionsChanged(Event):
    """To a user's group: re-check your session (`ended_session`: this one ended, close)."""

    type = "chat.sessions_changed"
    message_id: None
    user_id: int
    ended_session: str


@dataclass(frozen=True)
class ModelsLost(Event):
    """To a user's group: they left groups, and may use only `models_kept` now; a tab on a
    conversation of another model closes."""

    type = "chat.models_lost"
    message_id: None
    models_kept: list[str]


@dataclass(frozen=True)
class Deleted(Event):
    """The conversation is gone: tabs say so and close (its generation gets a Cancel)."""

    type = "chat.deleted"
    message_id: None


@dataclass(frozen=True)
class AnyoneHere(Event):
    """Is a tab open on this temporary chat? Every tab answers Here to `reply_channel`."""

    type = "chat.anyone_here"
    message_id: None
    reply_channel: str


# To the gateway's calls made with an API token.


@dataclass(frozen=True)
class TokenRevoked(Event):
    """The token was revoked: calls made with it stop their replies and end."""

    type = "chat.token_revoked"
    message_id: None
    token_id: int


# To the generation.


@dataclass(frozen=True)
class Cancel(Event):
    """Stop. `message_id` None: whichever reply of the conversation is running."""

    type = "chat.cancel"
    requested_at: float  # a Unix time: the Stop may have been pressed in another process
    cancelled_by: str


@dataclass(frozen=True)
class Sync(Event):
    """A tab that joined late or lost frames asks for a Snapshot on `reply_channel`."""

    type = "chat.sync"
    message_id: int
    reply_channel: str


@dataclass(frozen=True)
class Pong(Event):
    type = "chat.pong"
    message_id: int


# To whoever asked AnyoneHere (generation.temporary), on its own channel.


@dataclass(frozen=True)
class Here(Event):
    type = "chat.here"
    message_id: None


E = TypeVar("E", bound=Event)

TO_TABS: tuple[type[Event], ...] = (
    Started,
    BranchChanged,
    TitleChanged,
    Delta,
    Snapshot,
    Finished,
    Ping,
    SessionsChanged,
    ModelsLost,
    Deleted,
    AnyoneHere,
)
TO_GENERATION: tuple[type[Event], ...] = (Cancel, Sync, Pong)
TO_CALLS: tuple[type[Event], ...] = (TokenRevoked,)
TO_ASKER: tuple[type[Event], ...] = (Here,)
_BY_TYPE = {kind.type: kind for kind in (*TO_TABS, *TO_GENERATION, *TO_CALLS, *TO_ASKER)}
EVENT_TYPES = frozenset(_BY_TYPE)
TAB_EVENT_TYPES = frozenset(kind.type for kind in TO_TABS)  # what a tab's consumer handles


def parse(message: dict[str, Any]) -> Event:
    """The event a channel-layer message carries; KeyError for a type not in this protocol."""
    kind = _BY_TYPE[message["type"]]
    return kind(**{name: value for name, value in message.items() if name != "type"})


def parse_as(message: dict[str, Any], kind: type[E]) -> E:
    """parse() for a handler that knows which event it was given."""
    event = parse(message)
    if not isinstance(event, kind):
        raise TypeError(f"expected {kind.type}, got {message['type']}")
    return event


def handler_name(event_type: str) -> str:
    """The consumer method Channels calls for an event type: "chat.delta" -> "chat_delta"."""
    return event_type.replace(".", "_")

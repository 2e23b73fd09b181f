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
serializes with msgpack): a message's is events.payloads.MessagePayload.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from conversations.events.payloads import MessagePayload


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

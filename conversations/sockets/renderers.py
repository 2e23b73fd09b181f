"""One event shape, two renderers: htmx HTML fragments for the browser, JSON for API clients.

The consumer hands every event it sends to a socket to one of these; nothing else writes to a
socket, so the two protocols cannot drift apart. They take the protocol's typed events and
payloads, never the database.
"""

from __future__ import annotations

import functools
import json
import uuid
from datetime import datetime, timedelta
from typing import Any, Protocol

from django.template.loader import render_to_string
from django.utils.dateparse import parse_datetime

from conversations.events.protocol import MessagePayload, Started
from conversations.models import Conversation, Message
from conversations.pages.markdown import closed_length
from conversations.services.branches import Version

JSON_SUBPROTOCOL = "chatsite.v1.json"


class Renderer(Protocol):
    def started(self, event: Started) -> str: ...
    def branch(self, messages: list[MessagePayload]) -> str: ...
    def title(self, conversation_id: uuid.UUID, title: str) -> str: ...
    def delta(self, message_id: int, offset: int, text: str) -> str: ...
    def snapshot(self, message_id: int, text: str) -> str: ...
    def finished(self, message: MessagePayload) -> str: ...
    def settled(self, message: MessagePayload | None) -> str | None: ...
    def error(self, code: str, message: str) -> str: ...


class JsonRenderer:
    def started(self, event: Started) -> str:
        return _json(
            type="message.started",
            user_message=event.user_message,
            message=event.message,
            model_loading=event.model_loading,
            after=event.after,
        )

    def branch(self, messages: list[MessagePayload]) -> str:
        return _json(type="conversation.branch", messages=messages)

    def title(self, conversation_id: uuid.UUID, title: str) -> str:
        return _json(type="conversation.title", title=title)

    def delta(self, message_id: int, offset: int, text: str) -> str:
        return _json(type="message.delta", message_id=message_id, offset=offset, text=text)

    def snapshot(self, message_id: int, text: str) -> str:
        return _json(type="message.snapshot", message_id=message_id, offset=0, text=text)

    def finished(self, message: MessagePayload) -> str:
        return _json(type="message.finished", message=message)

    def settled(self, message: MessagePayload | None) -> str | None:
        return None  # JSON clients read history through the REST API

    def error(self, code: str, message: str) -> str:
        return _json(type="error", code=code, message=message)


class HtmlRenderer:
    """A tab's fragments. A reply being written shows its whole blocks rendered and the block
    being written as text (pages.markdown.streaming_parts): most deltas append to that text, and one
    that completes a block re-renders the body, so the tab keeps each reply's text so far."""

    def __init__(self) -> None:
        self._replies: dict[int, _Writing] = {}

    def started(self, event: Started) -> str:
        self._replies[event.message_id] = _Writing(event.message["content"])
        conversation = Conversation(id=event.conversation_id, title=event.title)
        reply = _message(event.message)
        reply.conversation = conversation
        return render_to_string(
            "conversations/events/started.html",
            {
                "user_message": _message(event.user_message) if event.user_message else None,
                "reply": reply,
                "streaming": True,
                "model_loading": event.model_loading,
                "after": event.after,
            },
        )

    def branch(self, messages: list[MessagePayload]) -> str:
        return render_to_string(
            "conversations/events/branch.html", {"messages": [_message(m) for m in messages]}
        )

    def title(self, conversation_id: uuid.UUID, title: str) -> str:
        conversation = Conversation(id=conversation_id, title=title)
        return render_to_string("conversations/events/title.html", {"c": conversation})

    def delta(self, message_id: int, offset: int, text: str) -> str:
        reply = self._replies.setdefault(message_id, _Writing(""))
        if reply.add(offset, text):
            return self.snapshot(message_id, reply.text)
        return _rendered_delta(message_id, text)

    def snapshot(self, message_id: int, text: str) -> str:
        self._replies[message_id] = _Writing(text)
        return render_to_string(
            "conversations/events/snapshot.html", {"message_id": message_id, "text": text}
        )

    def finished(self, message: MessagePayload | None) -> str:
        if message is not None:
            self._replies.pop(message["id"], None)
        reply = _message(message) if message is not None else None
        return render_to_string(
            "conversations/events/finished.html", {"reply": reply, "streaming": False}
        )

    def settled(self, message: MessagePayload | None) -> str | None:
        """The saved state, for a socket that (re)connects when nothing is streaming."""
        return self.finished(message)

    def error(self, code: str, message: str) -> str:
        return render_to_string(
            "conversations/events/error.html", {"code": code, "message": message}
        )


class _Writing:
    """A reply's text as one tab was sent it, in pieces (a long reply is not copied whole for
    every delta), and where its whole blocks end."""

    def __init__(self, text: str) -> None:
        self.parts = [text]
        self.length = len(text)
        self.closed = closed_length(text)

    @property
    def text(self) -> str:
        if len(self.parts) > 1:
            self.parts = ["".join(self.parts)]
        return self.parts[0]

    def add(self, offset: int, delta: str) -> bool:
        """Append a delta (from `offset`); True if it completed a block."""
        if offset != self.length:  # a tab is sent what follows what it has; be safe anyway
            self.parts = [self.text[:offset]]
            self.length = offset
        self.parts.append(delta)
        self.length += len(delta)
        # A block ends only at a line break: most deltas, a word or two, cannot end one.
        if "\n" not in delta:
            return False
        closed = closed_length(self.text)
        completed, self.closed = closed != self.closed, closed
        return completed


@functools.lru_cache(maxsize=512)
def _rendered_delta(message_id: int, text: str) -> str:
    """A delta's fragment, rendered once for every tab of the process that shows it (each tab's
    consumer renders the frames it sends, and most frames are the same for every tab)."""
    return render_to_string(
        "conversations/events/delta.html", {"message_id": message_id, "text": text}
    )


def _message(payload: MessagePayload) -> Message:
    """An unsaved Message with the fields the message template reads (its text and details)."""
    first_token_at = _moment(payload["first_token_at"])
    ttft_ms = payload["ttft_ms"]
    message = Message(
        id=payload["id"],
        parent_id=payload["parent"],
        role=payload["role"],
        content=payload["content"],
        status=payload["status"],
        engine=payload["engine"],
        model=payload["model"],
        model_slug=payload["model_slug"],
        cancelled_by=payload["cancelled_by"],
        error=payload["error"],
        finish_reason=payload["finish_reason"],
        first_token_at=first_token_at,
        finished_at=_moment(payload["finished_at"]),
        completion_tokens=payload["completion_tokens"],
        # The payload has no engine_ready_at; this one gives Message.ttft_ms the payload's value.
        engine_ready_at=(
            first_token_at - timedelta(milliseconds=ttft_ms)
            if first_token_at is not None and ttft_ms is not None
            else None
        ),
    )
    created_at = _moment(payload["created_at"])
    if created_at is not None:  # a saved row always has one; the field cannot be None
        message.created_at = created_at
    if payload["version"]:
        index, count, previous_id, next_id = payload["version"]
        message.version = Version(int(index or 0), int(count or 0), previous_id, next_id)
    return message


def _moment(text: str | None) -> datetime | None:
    return parse_datetime(text) if text else None


def _json(**fields: Any) -> str:
    return json.dumps(fields, ensure_ascii=False)

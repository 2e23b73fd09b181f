"""One event shape, two renderers: htmx HTML fragments for the browser (html_renderer.py), JSON
for API clients (here).

The consumer hands every event it sends to a socket to one of these; nothing else writes to a
socket, so the two protocols cannot drift apart. They take the protocol's typed events and
payloads, never the database, and return the frames to send, each within `frame_bytes`
(pieces.py): a long reply's text comes in pieces, a saved message too long for a frame is read
over HTTP.
"""

from __future__ import annotations

import json
import uuid
from typing import Any, Protocol

from conversations.events.payloads import MessagePayload
from conversations.events.protocol import Started
from conversations.sockets.pieces import delta_chars, fits, longest_head, pieces

JSON_SUBPROTOCOL = "chatsite.v1.json"

Frames = list[str]


class Renderer(Protocol):
    def started(self, event: Started) -> Frames: ...
    def branch(self, messages: list[MessagePayload]) -> Frames: ...
    def title(self, conversation_id: uuid.UUID, title: str) -> Frames: ...
    def delta(self, message_id: int, offset: int, text: str) -> Frames: ...
    def snapshot(self, message_id: int, text: str) -> Frames: ...
    def finished(self, message: MessagePayload) -> Frames: ...
    def settled(self, message: MessagePayload | None) -> Frames: ...
    def error(self, code: str, message: str) -> Frames: ...


class JsonRenderer:
    def __init__(self, frame_bytes: int) -> None:
        self.frame_bytes = frame_bytes

    def started(self, event: Started) -> Frames:
        frame = self._started(event, event.message)
        if fits(frame, self.frame_bytes):
            return [frame]
        # A continued reply starts with its text so far: that follows, in pieces.
        text = event.message["content"]
        return [
            self._started(event, {**event.message, "content": ""}),
            *self.snapshot(event.message_id, text),
        ]

    def _started(self, event: Started, message: MessagePayload) -> str:
        return _json(
            type="message.started",
            user_message=event.user_message,
            message=message,
            model_loading=event.model_loading,
            after=event.after,
        )

    def branch(self, messages: list[MessagePayload]) -> Frames:
        frame = _json(type="conversation.branch", messages=messages)
        if fits(frame, self.frame_bytes):
            return [frame]
        return [_json(type="conversation.branch", messages=None)]  # to be read over the REST API

    def title(self, conversation_id: uuid.UUID, title: str) -> Frames:
        return [_json(type="conversation.title", title=title)]

    def delta(self, message_id: int, offset: int, text: str) -> Frames:
        return [
            _json(type="message.delta", message_id=message_id, offset=offset + at, text=piece)
            for at, piece in pieces(text, 0, delta_chars(self.frame_bytes))
        ]

    def snapshot(self, message_id: int, text: str) -> Frames:
        head, length = longest_head(
            text,
            lambda part: _json(type="message.snapshot", message_id=message_id, offset=0, text=part),
            self.frame_bytes,
        )
        return [head, *self.delta(message_id, length, text[length:])]

    def finished(self, message: MessagePayload) -> Frames:
        frame = _json(type="message.finished", message=message)
        if fits(frame, self.frame_bytes):
            return [frame]
        # The client assembled the text from the deltas; the REST API has it too.
        return [_json(type="message.finished", message={**message, "content": None})]

    def settled(self, message: MessagePayload | None) -> Frames:
        return []  # JSON clients read history through the REST API

    def error(self, code: str, message: str) -> Frames:
        return [_json(type="error", code=code, message=message)]


def _json(**fields: Any) -> str:
    return json.dumps(fields, ensure_ascii=False)

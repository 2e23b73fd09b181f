"""The browser's frames: htmx out-of-band fragments, each within `frame_bytes` (pieces.py)."""

from __future__ import annotations

import functools
import uuid
from datetime import datetime, timedelta

from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.dateparse import parse_datetime
from django.utils.safestring import SafeString

from conversations.events.payloads import MessagePayload
from conversations.events.protocol import Started
from conversations.models import Attachment, Conversation, Feedback, Message
from conversations.pages.markdown import MAX_RENDERED_WRITING_CHARS, closed_length, render_writing
from conversations.services.branches import Version
from conversations.sockets.pieces import delta_chars, fits, longest_head, pieces
from conversations.sockets.renderers import Frames

# Room kept in a frame for what finished.html adds around a message (the Stop button, an empty
# error list) and branch.html around its messages.
FINISHED_MARKUP_BYTES = 1024
BRANCH_MARKUP_BYTES = 256


class HtmlRenderer:
    """A tab's fragments. A reply being written shows its whole blocks rendered and the block
    being written rendered as it will be once whole (pages.markdown.streaming_parts): most deltas
    re-render that one block, one that completes a block re-renders the body, so the tab keeps
    each reply's text so far. A block too long to render for every frame is text, appended to."""

    def __init__(self, conversation_id: uuid.UUID, frame_bytes: int) -> None:
        self.conversation_id = conversation_id
        self.frame_bytes = frame_bytes
        self._replies: dict[int, _Writing] = {}

    def started(self, event: Started) -> Frames:
        text = event.message["content"]
        frame = self._started(event, text)
        if fits(frame, self.frame_bytes):
            self._replies[event.message_id] = _Writing(text)
            return [frame]
        # A continued reply starts with its text so far: that follows, in pieces.
        return [self._started(event, ""), *self.snapshot(event.message_id, text)]

    def _started(self, event: Started, text: str) -> str:
        conversation = Conversation(id=event.conversation_id, title=event.title)
        reply = _message({**event.message, "content": text})
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

    def branch(self, messages: list[MessagePayload]) -> Frames:
        """The branch in as many frames as it takes: the first replaces the list, the others
        append to it."""
        frames: Frames = []
        batch: list[str] = []
        batch_bytes = 0
        for message in messages:
            rendered = self._message_or_loader(message, oob=False)
            size = len(rendered.encode())
            if batch and batch_bytes + size > self.frame_bytes - BRANCH_MARKUP_BYTES:
                frames.append(self._branch_frame(batch, first=not frames))
                batch, batch_bytes = [], 0
            batch.append(rendered)
            batch_bytes += size
        frames.append(self._branch_frame(batch, first=not frames))
        return frames

    def _branch_frame(self, rendered: list[str], *, first: bool) -> str:
        template = "branch.html" if first else "branch_more.html"
        # Each part is a rendered template: joined, they are as safe as each one.
        messages = SafeString("".join(rendered))
        return render_to_string(f"conversations/events/{template}", {"messages": messages})

    def title(self, conversation_id: uuid.UUID, title: str) -> Frames:
        conversation = Conversation(id=conversation_id, title=title)
        return [render_to_string("conversations/events/title.html", {"c": conversation})]

    def delta(self, message_id: int, offset: int, text: str) -> Frames:
        reply = self._replies.setdefault(message_id, _Writing(""))
        if reply.add(offset, text):
            return self.snapshot(message_id, reply.text)
        block = reply.block
        writing = render_writing(block)
        if isinstance(writing, SafeString):
            frame = _rendered_writing(message_id, writing, reply.length)
            if fits(frame, self.frame_bytes):
                return [frame]
        elif len(block) - len(text) <= MAX_RENDERED_WRITING_CHARS:
            # The block just grew too long to render: it is text from now on, text it is given.
            return self.snapshot(message_id, reply.text)
        return [
            _rendered_delta(message_id, piece)
            for _, piece in pieces(text, 0, delta_chars(self.frame_bytes))
        ]

    def snapshot(self, message_id: int, text: str) -> Frames:
        self._replies[message_id] = _Writing(text)
        head, length = longest_head(
            text,
            lambda part: render_to_string(
                "conversations/events/snapshot.html",
                # The whole text's length too: what the head leaves out follows as deltas.
                {"message_id": message_id, "text": part, "total": len(text)},
            ),
            self.frame_bytes,
        )
        # What the head leaves out is appended to the block being written, as text.
        rest = pieces(text, length, delta_chars(self.frame_bytes))
        return [head, *(_rendered_delta(message_id, piece) for _, piece in rest)]

    def finished(self, message: MessagePayload | None) -> Frames:
        if message is not None:
            self._replies.pop(message["id"], None)
        reply = self._message_or_loader(message, oob=True) if message is not None else ""
        context = {"reply": reply, "streaming": False}
        return [render_to_string("conversations/events/finished.html", context)]

    def settled(self, message: MessagePayload | None) -> Frames:
        """The saved state, for a socket that (re)connects when nothing is streaming."""
        return self.finished(message)

    def error(self, code: str, message: str) -> Frames:
        context = {"code": code, "message": message}
        return [render_to_string("conversations/events/error.html", context)]

    def _message_or_loader(self, payload: MessagePayload, *, oob: bool) -> str:
        """A saved message's article or, if that is too long for a frame, a placeholder the page
        replaces with the article it loads over HTTP."""
        context = {"m": _message(payload), "oob": oob}
        article = render_to_string("conversations/_message.html", context)
        if fits(article, self.frame_bytes - FINISHED_MARKUP_BYTES):
            return article
        url = reverse("conversation-message", args=[self.conversation_id, payload["id"]])
        return render_to_string(
            "conversations/events/message_loader.html",
            {"message_id": payload["id"], "role": payload["role"], "url": url, "oob": oob},
        )


class _Writing:
    """A reply's text as one tab was sent it, in pieces (a long reply is not copied whole for
    every delta), where its whole blocks end, and the block being written after them."""

    def __init__(self, text: str) -> None:
        self.parts = [text]
        self.length = len(text)
        self.closed = closed_length(text)
        self.block = text[self.closed :]

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
            self.closed = closed_length(self.parts[0])
            self.block = self.parts[0][self.closed :]
        self.parts.append(delta)
        self.length += len(delta)
        self.block += delta
        # A block ends only at a line break: most deltas, a word or two, cannot end one.
        if "\n" not in delta:
            return False
        closed = closed_length(self.text)
        completed, self.closed = closed != self.closed, closed
        self.block = self.text[closed:]
        return completed


# Small: every tab is sent a reply's block at about the same time, and a block is up to
# MAX_RENDERED_WRITING_CHARS of text, several times that once rendered.
@functools.lru_cache(maxsize=64)
def _rendered_writing(message_id: int, writing: SafeString, chars: int) -> str:
    """The block being written, rendered once for every tab of the process (as _rendered_delta),
    with the length of the reply's text so far (unsaved.js counts what the tab was shown)."""
    return render_to_string(
        "conversations/events/writing.html",
        {"message_id": message_id, "writing": writing, "chars": chars},
    )


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
        # .get: a payload made by a process from before 0028 (a rolling deploy) has none.
        model_name=payload.get("model_name", ""),
        cancelled_by=payload["cancelled_by"],
        error=payload["error"],
        finish_reason=payload["finish_reason"],
        first_token_at=first_token_at,
        finished_at=_moment(payload["finished_at"]),
        completion_tokens=payload["completion_tokens"],
        tool_calls=payload["tool_calls"],
        tool_call_id=payload["tool_call_id"],
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
    message.shown_attachments = [
        Attachment(
            id=uuid.UUID(shown["id"]), name=shown["name"], kind=shown["kind"], size=shown["size"]
        )
        for shown in payload.get("attachments") or ()
    ]
    if rated := payload.get("feedback"):
        message.shown_feedback = Feedback(rating=rated["rating"], reason=rated["reason"])
    if payload["version"]:
        index, count, previous_id, next_id = payload["version"]
        message.version = Version(int(index or 0), int(count or 0), previous_id, next_id)
    return message


def _moment(text: str | None) -> datetime | None:
    return parse_datetime(text) if text else None

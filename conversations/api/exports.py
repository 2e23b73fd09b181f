"""Transcripts as files: the one formatter behind the admin's export action and the API's exports."""

from __future__ import annotations

import json
from collections.abc import Generator, Iterable
from contextlib import closing
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar, cast

from django.db.models import Prefetch, QuerySet
from django.http import HttpResponse
from django.utils.http import content_disposition_header
from django.utils.text import slugify
from rest_framework.utils.encoders import JSONEncoder

from conversations.api.serializers import ConversationDetailSerializer
from conversations.models import Conversation, Message
from conversations.services import branches


@dataclass(frozen=True)
class Format:
    content_type: str
    extension: str


FORMATS = {
    "json": Format("application/json", "json"),
    "markdown": Format("text/markdown; charset=utf-8", "md"),
    "txt": Format("text/plain; charset=utf-8", "txt"),
}
JSONL_CONTENT_TYPE = "application/x-ndjson"
# Conversations per database round trip in the JSONL export. A page may read up to a batch more
# than it keeps, so batches are small: one conversation can hold megabytes.
JSONL_CHUNK_SIZE = 20


Conversations = TypeVar("Conversations", bound=QuerySet[Conversation])


def with_messages(conversations: Conversations) -> Conversations:
    """The queryset every export reads: owners joined, messages in order, one query each."""
    return conversations.select_related("owner").prefetch_related(
        Prefetch("messages", queryset=Message.objects.order_by("created_at", "id"))
    )


def shown_branch(conversation: Conversation) -> list[Message]:
    """The branch the owner sees (from the prefetched messages), each with its version: the
    Markdown and text transcripts; the JSON ones hold every version."""
    return branches.shown(list(conversation.messages.all()), conversation.current_leaf_id)


def conversation_data(conversation: Conversation) -> dict[str, Any]:
    return dict(ConversationDetailSerializer(conversation).data)


def to_json(data: Any) -> str:
    return json.dumps(data, cls=JSONEncoder, ensure_ascii=False, indent=2) + "\n"


def stop_note(message: Message) -> str:
    """Why a reply did not finish normally, in words; empty for a complete or user message."""
    if message.status == Message.Status.CANCELLED:
        who = (
            "after everyone left"
            if message.cancelled_by == "disconnect"
            else f"by {message.cancelled_by or 'someone'}"
        )
        tokens = message.completion_tokens or 0
        note = f"Stopped {who} after {tokens} token{'s' if tokens != 1 else ''}"
        if message.cancel_latency_ms is not None:
            note += f" (engine confirmed in {message.cancel_latency_ms:.0f} ms)"
        return note + "."
    if message.status == Message.Status.ERROR:
        return f"Failed: {message.error or 'the engine failed.'}"
    if message.status == Message.Status.INTERRUPTED:
        return "Interrupted: the server stopped while writing this reply."
    if message.is_active:
        return "Still being written when exported."
    return ""


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S UTC") if value else "-"


def to_markdown(conversation: Conversation) -> str:
    lines = [
        f"# {conversation}",
        "",
        f"- Conversation: `{conversation.pk}`",
        f"- Owner: {conversation.owner.get_username()}",
        f"- Created: {_when(conversation.created_at)}",
        f"- Last activity: {_when(conversation.updated_at)}",
    ]
    for message in shown_branch(conversation):
        model = f"{message.model_slug}: " if message.model_slug else ""
        source = f" · {model}{message.engine}/{message.model}" if message.engine else ""
        version = (
            f" · version {message.version.index} of {message.version.count}"
            if message.version.count > 1
            else ""
        )
        heading = f"## {message.get_role_display()} · {_when(message.created_at)}{source}{version}"
        lines += ["", heading, ""]
        lines.append(message.content or "_(no text)_")
        if note := stop_note(message):
            lines += ["", f"> **{message.get_status_display()}:** {note}"]
    return "\n".join(lines) + "\n"


def to_text(conversation: Conversation) -> str:
    lines = [
        str(conversation),
        f"Conversation {conversation.pk}, owner {conversation.owner.get_username()}, "
        f"created {_when(conversation.created_at)}",
    ]
    for message in shown_branch(conversation):
        lines += ["", f"[{message.role}] {_when(message.created_at)}", message.content]
        if note := stop_note(message):
            lines.append(f"[{note}]")
    return "\n".join(lines) + "\n"


def render(conversations: Iterable[Conversation], fmt: str, *, many: bool) -> str:
    """Conversations (read through with_messages) as one file in a format of FORMATS."""
    items = list(conversations)
    if fmt == "json":
        data = [conversation_data(c) for c in items]
        return to_json(data if many else data[0])
    one = to_markdown if fmt == "markdown" else to_text
    separator = "\n---\n\n" if fmt == "markdown" else "\n" + "=" * 72 + "\n\n"
    return separator.join(one(c) for c in items)


def download(body: str, fmt: str, *, stem: str) -> HttpResponse:
    spec = FORMATS[fmt]
    filename = f"{slugify(stem) or 'conversation'}.{spec.extension}"
    return HttpResponse(
        body.encode(),
        content_type=spec.content_type,
        headers={"Content-Disposition": content_disposition_header(True, filename)},
    )


@dataclass(frozen=True)
class JsonlPage:
    body: bytes
    # The page's last conversation when more follow it (the next page starts after it), else None.
    last: Conversation | None


def jsonl_page(conversations: QuerySet[Conversation], *, max_bytes: int) -> JsonlPage:
    """One JSON object a line per conversation, in the queryset's order, up to max_bytes.

    A page holds at least one conversation, however long. Conversations are read a batch at a
    time (iterator(chunk_size=...) with prefetch_related: two queries a batch), and reading stops
    at the first one that does not fit: memory holds the page and one batch, however long the
    history.
    """
    serializer = ConversationDetailSerializer()  # unbound and reused: fields are built once
    lines: list[bytes] = []
    size = 0
    previous: Conversation | None = None
    # A page that stops early closes the database cursor now, not whenever the generator is
    # collected. (iterator() returns a generator; the stubs only promise an Iterator.)
    batches = with_messages(conversations).iterator(chunk_size=JSONL_CHUNK_SIZE)
    with closing(cast("Generator[Conversation, None, None]", batches)) as rows:
        for conversation in rows:
            data = serializer.to_representation(conversation)
            # Prefetched messages point back at their conversation: a reference cycle that only
            # the (rarely running) full garbage collection would free. Dropping it frees them now.
            conversation._prefetched_objects_cache.clear()  # type: ignore[attr-defined]
            line = (json.dumps(data, cls=JSONEncoder, ensure_ascii=False) + "\n").encode()
            if lines and size + len(line) > max_bytes:
                return JsonlPage(b"".join(lines), last=previous)
            lines.append(line)
            size += len(line)
            previous = conversation
    return JsonlPage(b"".join(lines), last=None)

"""Transcripts as files: the one formatter behind the admin's export action and the API's exports."""

from __future__ import annotations

import json
from collections.abc import Generator, Iterable
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import (
    Func,
    IntegerField,
    OuterRef,
    Prefetch,
    QuerySet,
    Subquery,
    Sum,
    Value,
    prefetch_related_objects,
)
from django.db.models.expressions import Expression
from django.db.models.functions import Coalesce
from django.db.models.sql.compiler import SQLCompiler
from django.http import HttpResponse
from django.utils.http import content_disposition_header
from django.utils.text import slugify
from rest_framework.utils.encoders import JSONEncoder

from conversations.api.serializers import ConversationDetailSerializer
from conversations.api.transcripts import to_markdown, to_text
from conversations.models import Attachment, Conversation, Message


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
# The most conversations the JSONL export reads in one database round trip. What it reads is
# bounded in bytes (see jsonl_page); this only keeps each query's list of ids short.
JSONL_CHUNK_SIZE = 20
# What a message and a conversation add to a JSON line besides their texts (field names, ids,
# times): measured 640 and 330 bytes. Lower rather than higher, so that an estimate does not
# keep a conversation that fits off its page.
MESSAGE_JSON_BYTES = 600
CONVERSATION_JSON_BYTES = 300
ATTACHMENT_JSON_BYTES = 150  # an attachment's id, name, kind and size


Conversations = TypeVar("Conversations", bound=QuerySet[Conversation])


def messages_in_order() -> Prefetch[Any]:
    """A conversation's messages in order, each with its rating (joined) and its attachments
    (one query more)."""
    in_order = (
        Message.objects.order_by("created_at", "id")
        .select_related("feedback")
        .prefetch_related("attachments")
    )
    return Prefetch("messages", queryset=in_order)


def with_messages(conversations: Conversations) -> Conversations:
    """The queryset every export reads: owners and projects joined, messages in order, one
    query each."""
    return conversations.select_related("owner", "project").prefetch_related(messages_in_order())


def conversation_data(conversation: Conversation) -> dict[str, Any]:
    return dict(ConversationDetailSerializer(conversation).data)


def to_json(data: Any) -> str:
    return json.dumps(data, cls=JSONEncoder, ensure_ascii=False, indent=2) + "\n"


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


class OctetLength(Func):
    """A text's length in bytes (UTF-8), which is about what it takes in a JSON line.

    PostgreSQL reads it from the stored value's header, without reading the text itself.
    """

    function = "OCTET_LENGTH"
    output_field = IntegerField()

    def as_sqlite(
        self, compiler: SQLCompiler, connection: BaseDatabaseWrapper, **extra: Any
    ) -> tuple[str, Any]:
        template = "LENGTH(CAST(%(expressions)s AS BLOB))"  # SQLite has OCTET_LENGTH from 3.43
        return self.as_sql(compiler, connection, template=template, **extra)


def estimated_bytes() -> Expression:
    """About how many bytes a conversation's JSON line holds, from its messages' sizes in the
    database: what reading it costs, known before its messages are read."""
    texts = (
        OctetLength("content")
        + OctetLength("reasoning")
        + OctetLength("system_prompt")
        + OctetLength("error")
    )
    sizes = (
        Message.objects.filter(conversation=OuterRef("pk"))
        .order_by()
        .values("conversation")
        .annotate(total=Sum(texts + Value(MESSAGE_JSON_BYTES)))
        .values("total")
    )
    # The text read from its messages' files is in the line too.
    attached = (
        Attachment.objects.filter(conversation=OuterRef("pk"), message__isnull=False)
        .order_by()
        .values("conversation")
        .annotate(total=Sum(OctetLength("text") + Value(ATTACHMENT_JSON_BYTES)))
        .values("total")
    )
    return (
        Coalesce(Subquery(sizes), 0)
        + Coalesce(Subquery(attached), 0)
        + Value(CONVERSATION_JSON_BYTES)
    )


@dataclass
class _PageWriter:
    max_bytes: int
    serializer: ConversationDetailSerializer = field(default_factory=ConversationDetailSerializer)
    lines: list[bytes] = field(default_factory=list)
    size: int = 0
    last: Conversation | None = None

    def has_room(self, size: int) -> bool:
        """Whether this many more bytes fit; the page's first line always does."""
        return not self.lines or self.size + size <= self.max_bytes

    def page(self, *, more: bool) -> JsonlPage:
        return JsonlPage(b"".join(self.lines), last=self.last if more else None)

    def write(self, batch: list[Conversation]) -> bool:
        """Read the batch's messages and write its lines in order; False at the first line
        that does not fit (it is left out, and so are the ones after it)."""
        prefetch_related_objects(batch, messages_in_order())
        for conversation in batch:
            data = self.serializer.to_representation(conversation)
            # Prefetched messages point back at their conversation: a reference cycle that only
            # the (rarely running) full garbage collection would free. Dropping it frees them now.
            conversation._prefetched_objects_cache.clear()  # type: ignore[attr-defined]
            line = (json.dumps(data, cls=JSONEncoder, ensure_ascii=False) + "\n").encode()
            if not self.has_room(len(line)):
                return False
            self.lines.append(line)
            self.size += len(line)
            self.last = conversation
        return True


def jsonl_page(conversations: QuerySet[Conversation], *, max_bytes: int) -> JsonlPage:
    """One JSON object a line per conversation, in the queryset's order, up to max_bytes.

    A page holds at least one conversation, however long, and stops before the first that does
    not fit. What it reads is bounded in bytes too: conversations come first without their
    messages but with the size of them (estimated_bytes), and their messages are read a batch at
    a time, only for the conversations that fit. Memory holds about the page twice (its lines,
    and the batch being written), however long the history or its conversations.
    """
    page = _PageWriter(max_bytes)
    batch: list[Conversation] = []
    batch_bytes = 0
    headers = (
        conversations.select_related("owner", "project")
        .annotate(export_bytes=estimated_bytes())
        .iterator(chunk_size=JSONL_CHUNK_SIZE)
    )
    # A page that stops early closes the database cursor now, not whenever the generator is
    # collected. (iterator() returns a generator; the stubs only promise an Iterator.)
    with closing(cast("Generator[Conversation, None, None]", headers)) as rows:
        for conversation in rows:
            estimate: int = conversation.export_bytes  # type: ignore[attr-defined]
            if batch and page.size + batch_bytes + estimate > max_bytes:
                page.write(batch)  # this one would not fit: its messages are not read
                return page.page(more=True)
            if not batch and not page.has_room(estimate):
                return page.page(more=True)
            batch.append(conversation)
            batch_bytes += estimate
            if len(batch) == JSONL_CHUNK_SIZE:
                if not page.write(batch):
                    return page.page(more=True)
                batch, batch_bytes = [], 0
    return page.page(more=not page.write(batch))

"""Importing an export into a user's history: read a conversation, write it, report.

The file is read a conversation at a time (conversations.imports.reading) by the reader of its
format (given, or detected from its first conversation), and each conversation is written
(conversations.imports.writing) as the importing user's own, marked `origin="import"` with its
format and id in the source, keeping the source's times. By default an import is all or nothing:
one transaction, and a conversation that cannot be imported (or a file that breaks halfway)
leaves nothing behind. With `keep_partial` each conversation is its own transaction: those that
cannot be imported are skipped with the reason, and a file that breaks halfway keeps what came
before.

Conversations imported before (the same format and id in the source) are skipped, so importing
a file again adds only what is new.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import IO, Any

from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.formats import number_format
from django.utils.translation import gettext as _

from conversations.engines import specs
from conversations.imports import FORMATS, Format, chatsite, detect
from conversations.imports.departure import never
from conversations.imports.limits import Limits, too_large
from conversations.imports.reading import BoundedReader, json_values
from conversations.imports.slots import Lease, import_slot
from conversations.imports.source import (
    ClientLeft,
    ConversationRefused,
    ImportRefused,
    SourceConversation,
)
from conversations.imports.writing import ConversationWriter
from conversations.models import Conversation
from conversations.services import audit
from conversations.services.text import make_storable
from conversations.types import User

MAX_TITLE = 200
ALREADY_IMPORTED = "already imported"
TWICE_IN_FILE = "appears twice in the file (the first was imported)"
ALREADY_HERE = "already in your history (it was exported from here)"
NO_MESSAGES = "no messages to import"
LONG_SYSTEM_PROMPT = f"a system prompt over {specs.MAX_SYSTEM_PROMPT_CHARS:,} characters (left out)"


@dataclass(frozen=True)
class ImportedConversation:
    id: uuid.UUID
    title: str
    messages: int


@dataclass(frozen=True)
class Skipped:
    title: str
    external_id: str
    reason: str
    # How many of its messages were left out; None when the whole conversation was skipped.
    messages: int | None = None


@dataclass
class ImportReport:
    format: str = ""
    imported: list[ImportedConversation] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    # With keep_partial: why the rest of the file was not read (empty: it all was).
    stopped: str = ""


# A multipart body holds the file and a few short fields: this much more than the file is
# allowed before a request is refused from its Content-Length alone.
MULTIPART_ALLOWANCE = 64 * 1024


def upload_limit(limits: Limits | None = None) -> int:
    """The most an import's request may carry: the file's limit and a few form fields."""
    return (limits or Limits.from_settings()).max_bytes + MULTIPART_ALLOWANCE


def check_request_size(meta: Mapping[str, Any], limits: Limits | None = None) -> None:
    """Refuse an upload whose declared length is over the limit, before its body is parsed
    (the file is never copied out of the request, let alone read)."""
    limits = limits or Limits.from_settings()
    try:
        declared = int(meta.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return  # Django's parser refuses a malformed length itself
    if declared > upload_limit(limits):
        raise too_large(declared, limits.max_bytes, "The upload")


def import_history(
    *,
    owner: User,
    file: IO[bytes],
    fmt: str | None = None,
    keep_partial: bool = False,
    limits: Limits | None = None,
    client_left: Callable[[], bool] = never,
) -> ImportReport:
    """Import the export in `file` (binary, seekable) into `owner`'s history.

    `fmt` is a name of conversations.imports.FORMATS; None detects it. Raises ImportRefused,
    with nothing written, when the file cannot be imported (too large, not JSON, a zip bomb, an
    unknown format) or, unless keep_partial, when any conversation of it cannot; ImportBusy,
    before reading any of it, while another import of the owner's runs or this process runs
    CHAT_IMPORTS_AT_ONCE (conversations.imports.slots); ClientLeft, between two
    conversations, once `client_left()` says the client that sent the file is gone (unless
    keep_partial, nothing is kept).
    """
    if fmt is not None and fmt not in FORMATS:
        raise ImportRefused("bad_format", f"Choose a format among {', '.join(FORMATS)}.")
    with import_slot(user_id=owner.pk) as lease:
        importer = _Importer(owner, limits or Limits.from_settings(), fmt, keep_partial, lease)
        importer.client_left = client_left
        _run(importer, file)
    return importer.report


def _run(importer: _Importer, file: IO[bytes]) -> None:
    with json_values(file, importer.limits) as (values, reader):
        if not importer.keep_partial:
            with transaction.atomic():
                importer.run(values, reader)
                _audited(importer)
        else:
            try:
                importer.run(values, reader)
            except ImportRefused as exc:
                if not importer.report.imported:
                    raise
                importer.report.stopped = f"{exc.message} The conversations before it were kept."
            _audited(importer)


def _audited(importer: _Importer) -> None:
    report = importer.report
    audit.record(
        audit.Event.IMPORT,
        subject=importer.owner,
        format=report.format,
        imported=len(report.imported),
        skipped=len(report.skipped),
        stopped=bool(report.stopped),
    )


class _Importer:
    """One import's run: each conversation of the file read, checked, skipped if it is here
    already or written, and the report of it all."""

    def __init__(
        self, owner: User, limits: Limits, fmt: str | None, keep_partial: bool, lease: Lease
    ):
        self.owner = owner
        self.lease = lease
        self.limits = limits
        self.format: Format | None = FORMATS[fmt] if fmt else None
        self.keep_partial = keep_partial
        self.report = ImportReport()
        self.seen: set[str] = set()
        self.writer = ConversationWriter(owner, timezone.now())
        self.client_left: Callable[[], bool] = never

    def run(self, values: Any, reader: BoundedReader) -> None:
        number = 1
        reader.mark(number)
        for value in values:
            if number > self.limits.max_conversations:
                raise ImportRefused(
                    "too_many_conversations",
                    _(
                        "The file holds more than %(most)s conversations; split it, or import "
                        "it in parts."
                    )
                    % {"most": number_format(self.limits.max_conversations, force_grouping=True)},
                )
            if self.client_left():
                raise ClientLeft()
            self.lease.renew()
            self.one(value, number)
            number += 1
            reader.mark(number)
        if number == 1:
            raise ImportRefused("empty", _("The file holds no conversations."))

    def one(self, value: Any, number: int) -> None:
        fmt = self.format_of(value)
        try:
            source = fmt.parse(value)
            self.check(source)
        except ConversationRefused as exc:
            title = _title_in(value)
            if not self.keep_partial:
                raise ImportRefused(
                    "bad_conversation",
                    f"Conversation {number} of the file ({title or 'untitled'}): {exc} Nothing "
                    "was imported; choose to keep what can be imported to import the others.",
                ) from None
            self.skip(title, "", str(exc))
            return
        title = _title(source)
        if not source.messages:
            self.skip(title, source.external_id, NO_MESSAGES)
            return
        if reason := self.already_here(source, fmt):
            self.skip(title, source.external_id, reason)
            return
        try:
            with transaction.atomic():  # a savepoint: a duplicate undoes this conversation only
                conversation = self.writer.write(source, fmt, title)
        except IntegrityError:  # imported meanwhile by another request
            self.skip(title, source.external_id, ALREADY_IMPORTED)
            return
        self.report.imported.append(
            ImportedConversation(conversation.pk, title, len(source.messages))
        )
        for reason, count in source.left_out.items():
            self.report.skipped.append(Skipped(title, source.external_id, reason, count))

    def format_of(self, value: Any) -> Format:
        """The import's format: the one given, else the first conversation's."""
        if self.format is not None and not self.report.format:
            self.report.format = self.format.NAME
            if not self.format.looks_like(value):
                raise ImportRefused(
                    "wrong_shape",
                    _(
                        "The file is not a %(format)s export: its first conversation does not "
                        "have %(format)s's shape."
                    )
                    % {"format": self.format.LABEL},
                )
        if self.format is None:
            self.format = detect(value)
            if self.format is None:
                raise ImportRefused(
                    "unknown_format",
                    _(
                        "The file holds JSON, but not conversations of a format chatsite "
                        "imports (%(formats)s)."
                    )
                    % {"formats": ", ".join(f.LABEL for f in FORMATS.values())},
                )
            self.report.format = self.format.NAME
        return self.format

    def check(self, source: SourceConversation) -> None:
        if len(source.messages) > self.limits.max_messages:
            raise ConversationRefused(
                f"It holds {len(source.messages):,} messages; an import takes up to "
                f"{self.limits.max_messages:,} a conversation."
            )
        for message in source.messages:
            if len(message.content) > self.limits.max_message_chars:
                raise ConversationRefused(
                    f"A message of it is {len(message.content):,} characters long; an import "
                    f"takes up to {self.limits.max_message_chars:,}."
                )
        if source.system_prompt and len(source.system_prompt) > specs.MAX_SYSTEM_PROMPT_CHARS:
            source.system_prompt = None
            source.left_out[LONG_SYSTEM_PROMPT] += 1

    def already_here(self, source: SourceConversation, fmt: Format) -> str:
        """Why this conversation is skipped as one the user has already; empty if not."""
        external_id = source.external_id
        if not external_id:
            return ""
        if external_id in self.seen:
            return TWICE_IN_FILE
        self.seen.add(external_id)
        mine = Conversation.objects.filter(owner=self.owner)
        if mine.filter(origin_detail=fmt.NAME, external_id=external_id).exists():
            return ALREADY_IMPORTED
        here = _uuid_or_none(external_id) if fmt is chatsite else None
        if here is not None and mine.filter(pk=here).exists():
            return ALREADY_HERE
        return ""

    def skip(self, title: str, external_id: str, reason: str) -> None:
        self.report.skipped.append(Skipped(title, external_id, reason))


def _title(source: SourceConversation) -> str:
    """The source's title on one line, else the first words of its first message (as a new
    conversation here gets)."""
    title = " ".join(source.title.split())
    if not title and source.messages:
        title = Conversation.first_words(source.messages[0].content)
    return title[:MAX_TITLE]


def _title_in(value: Any) -> str:
    """A title to name a conversation that could not be read, if it has one that is text."""
    if isinstance(value, dict):
        for name in ("title", "name"):
            if isinstance(value.get(name), str):
                return make_storable(Conversation.first_words(value[name]))
    return ""


def _uuid_or_none(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value)
    except ValueError:
        return None

"""A file put in a composer: judged from its bytes, its text read once (in a child process,
off the event loop), counted against the model's context, then stored under a key of its own.

Nothing is stored for a file that is refused: too large, of a kind chatsite does not read, an
image for a model that reads none, unreadable, or too long for the model's context once the
reply and the system prompt have their room. The refusal says why, with the numbers.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.uploadedfile import UploadedFile
from django.db import models, transaction
from django.db.models import Sum
from django.utils.formats import number_format
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy as _lazy

from conversations.attachments.extraction import Unreadable, extracted_text
from conversations.attachments.kinds import Kind, kind_of
from conversations.attachments.names import shown_name
from conversations.attachments.receivers import delete_files_after_commit
from conversations.engines.base import Engine, counts_exactly
from conversations.engines.specs import ModelSpec, ReplySettings
from conversations.models import Attachment, Conversation, Message
from conversations.services import prompt
from conversations.services.text import size_in_words
from conversations.types import User

IMAGE_TOKENS = prompt.IMAGE_TOKENS
READ_KINDS = _lazy(
    "PDF, DOCX, text (Markdown, CSV, JSON, code) and, for a model that reads them, images"
)


class AttachmentRefused(Exception):
    """A file that is not kept; the message says why, for the person who sent it."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Reader:
    """The model that will read the file: its spec, its engine (for the count), and the reply's
    settings in this conversation (the room they leave)."""

    model: ModelSpec
    engine: Engine
    reply: ReplySettings


async def attach(
    *, owner: User, conversation: Conversation, upload: UploadedFile[Any], reader: Reader
) -> Attachment:
    """Keep `upload` for the next message of `conversation`, or raise AttachmentRefused."""
    name = shown_name(upload.name or "")
    size = upload.size or 0
    _check_size(name, size)
    await _check_room_in_composer(owner, conversation, size)
    data = await sync_to_async(upload.read, thread_sensitive=False)()
    kind, text = await read(name, data, reader.model)
    tokens, estimated = IMAGE_TOKENS, True
    if not kind.is_image:
        tokens, room = await asyncio.to_thread(_count, name, kind, text, reader)
        estimated = not counts_exactly(reader.engine)
        if tokens > room:
            raise AttachmentRefused("too_long", too_long(name, tokens, room, reader, estimated))
    return await sync_to_async(keep)(
        owner=owner,
        conversation=conversation,
        name=name,
        kind=kind,
        data=data,
        text=text,
        tokens=tokens,
        estimated=estimated,
        counted_for=reader.model.engine_key,
    )


async def read(name: str, data: bytes, model: ModelSpec) -> tuple[Kind, str]:
    """The file's kind, judged from its bytes, and its text (empty for an image), read within
    the reader's limits; or AttachmentRefused: too large, a kind chatsite does not read, an image
    for a model that reads none, unreadable, or without text."""
    _check_size(name, len(data))
    kind = await asyncio.to_thread(kind_of, data)  # a zip's directory, a text's decoding
    if kind is None:
        raise AttachmentRefused(
            "unsupported",
            _("%(name)s is not a file chatsite reads (%(kinds)s).")
            % {"name": name, "kinds": READ_KINDS},
        )
    if kind.is_image:
        if not model.vision:
            raise AttachmentRefused(
                "no_vision",
                _("%(model)s does not read images: pick a model that does.")
                % {"model": model.name},
            )
        return kind, ""
    try:
        text = await extracted_text(data, kind)
    except Unreadable as exc:
        raise AttachmentRefused("unreadable", f"{name}: {exc}") from None
    if not text.strip():
        raise AttachmentRefused(
            "no_text",
            _("%(name)s holds no text to read (a scan, or an empty file?).") % {"name": name},
        )
    return kind, text


def keep(
    *,
    owner: User,
    conversation: Conversation,
    name: str,
    kind: Kind,
    data: bytes,
    text: str,
    message: Message | None = None,
    tokens: int = 0,
    estimated: bool = True,
    counted_for: str = "",
) -> Attachment:
    """Store a file that was read, under a key of its own, with its row: waiting in the
    composer, or already `message`'s. Blocking. `counted_for` empty: not counted yet (a send
    counts it for its model)."""
    attachment = Attachment(
        owner=owner,
        conversation=conversation,
        message=message,
        name=name,
        kind=kind,
        size=len(data),
        text=text,
        tokens=tokens,
        tokens_estimated=estimated,
        counted_for=counted_for,
    )
    _store(attachment, data)
    return attachment


def _check_size(name: str, size: int) -> None:
    limit = settings.CHAT_ATTACHMENT_MAX_BYTES
    if size > limit:
        raise AttachmentRefused(
            "too_large",
            _("%(name)s is %(size)s; attachments are limited to %(limit)s.")
            % {"name": name, "size": size_in_words(size), "limit": size_in_words(limit)},
        )


def _count(name: str, kind: Kind, text: str, reader: Reader) -> tuple[int, int]:
    """Blocking: the engine's tokenizer may load, or ask the model's server."""
    part = prompt.attachment_part(name, kind.label, text)
    return reader.engine.count_tokens(part), prompt.prompt_room(reader.engine, reader.reply)


def too_long(name: str, tokens: int, room: int, reader: Reader, estimated: bool) -> str:
    numbers = {
        "name": name,
        "tokens": number_format(tokens, force_grouping=True),
        "model": reader.model.name,
        "context": number_format(reader.engine.context_tokens, force_grouping=True),
        "room": number_format(max(room, 0), force_grouping=True),
        "reply": number_format(reader.reply.max_tokens, force_grouping=True),
    }
    text = (
        _(
            "%(name)s is about %(tokens)s tokens; %(model)s reads %(context)s at most, and "
            "%(room)s are left for a message once its reply (%(reply)s) and the system prompt "
            "have theirs. Nothing was cut: send a shorter file, or a part of it."
        )
        if estimated
        else _(
            "%(name)s is %(tokens)s tokens; %(model)s reads %(context)s at most, and %(room)s "
            "are left for a message once its reply (%(reply)s) and the system prompt have "
            "theirs. Nothing was cut: send a shorter file, or a part of it."
        )
    )
    return text % numbers


async def _check_room_in_composer(owner: User, conversation: Conversation, size: int) -> None:
    """One message's limits, checked before the file is read (and again as it is stored)."""
    await sync_to_async(_check_room)(owner.pk, conversation.pk, size)


def _check_room(owner_id: int, conversation_id: uuid.UUID, size: int) -> None:
    """One message's limits: how many files wait in the composer, and their bytes together."""
    waiting = Attachment.objects.pending().filter(
        owner_id=owner_id, conversation_id=conversation_id
    )
    held = waiting.aggregate(count=models.Count("pk"), size=Sum("size"))
    most = settings.CHAT_ATTACHMENTS_PER_MESSAGE
    if held["count"] >= most:
        raise AttachmentRefused(
            "too_many", _("A message may carry %(most)d attachments at most.") % {"most": most}
        )
    limit = settings.CHAT_ATTACHMENT_MAX_MESSAGE_BYTES
    if (held["size"] or 0) + size > limit:
        raise AttachmentRefused(
            "too_large",
            _("One message's attachments are limited to %(limit)s together.")
            % {"limit": size_in_words(limit)},
        )


def _store(attachment: Attachment, data: bytes) -> None:
    """The file under its generated key, then its row; a row that cannot be written (or a
    composer found full by then) leaves no file behind. A composer's file is counted again
    with its conversation's row locked: files dropped at once, each checked before its reading,
    could together pass the limits."""
    attachment.file.save(attachment.pk.hex, ContentFile(data), save=False)
    try:
        with transaction.atomic():
            if attachment.message_id is None:
                Conversation.objects.select_for_update().filter(
                    pk=attachment.conversation_id
                ).first()
                _check_room(attachment.owner_id, attachment.conversation_id, attachment.size)
            attachment.save()
    except BaseException:
        attachment.file.delete(save=False)
        raise


async def detach(*, owner: User, attachment_id: str) -> bool:
    """Take a file out of its composer before it is sent (the owner's only); False if there
    was none such."""
    return await sync_to_async(_delete_pending)(owner, attachment_id)


def _delete_pending(owner: User, attachment_id: str) -> bool:
    """The row locked while it is still pending, then deleted: a send in another tab either took
    it first (nothing is deleted: it is that message's now) or finds it gone."""
    with transaction.atomic():
        rows = Attachment.objects.pending().filter(owner=owner, pk=attachment_id)
        name = rows.select_for_update().values_list("file", flat=True).first()
        if name is None:
            return False
        deleted, _ = rows.delete()
        if deleted:
            delete_files_after_commit([name or ""])
    return bool(deleted)

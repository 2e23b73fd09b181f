"""A send's attachments: checked to fit the model's context before anything is saved, then
moved from the composer onto the new user message in the send's transaction.

The count comes first, outside the send's locks: the engine's tokenizer may have to load for a
file counted for another model (the composer counts for the model picked when the file came).
What is known to fit is then linked under the locks with one conditional UPDATE, so a file sent
from another tab a moment ago, or taken out of the composer, refuses the send instead of
vanishing from it.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Sum
from django.utils.formats import number_format
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy as _lazy

from conversations.engines.base import counts_exactly
from conversations.generation.resolve import CallSettings, Resolved, resolve
from conversations.models import Attachment, AttachmentQuerySet, Conversation, Message
from conversations.services import prompt
from conversations.services.errors import SendRefused
from conversations.services.text import size_in_words


class AttachmentsRefused(SendRefused):
    code = "attachments_refused"


GONE = _lazy("An attachment of this message is no longer in the composer: attach it again.")


def check_fit(
    conversation: Conversation,
    ids: Sequence[uuid.UUID],
    *,
    content: str,
    model_slug: str,
    call: CallSettings,
) -> None:
    """Refuse, with the numbers, a message whose text and attachments would not fit the context
    of the model that will answer it once its reply and the system prompt have their room:
    nothing is ever cut to make it fit."""
    owner = get_user_model().objects.get(pk=conversation.owner_id)
    chosen = Conversation.objects.get(pk=conversation.pk)
    resolved = resolve(owner=owner, chosen=chosen, model_slug=model_slug, call=call)
    attachments = list(_waiting(conversation, ids))
    if len(attachments) != len(ids):
        raise AttachmentsRefused(str(GONE))
    engine = resolved.engine
    costs = [(attachment.name, _tokens(attachment, resolved)) for attachment in attachments]
    costs.append((_("your text"), engine.count_tokens(content) if content else 0))
    needed = sum(tokens for _name, tokens in costs)
    room = prompt.prompt_room(engine, resolved.settings)
    if needed > room:
        parts = ", ".join(
            f"{name} {number_format(tokens, force_grouping=True)}" for name, tokens in costs
        )
        numbers = {
            "needed": number_format(needed, force_grouping=True),
            "parts": parts,
            "model": resolved.model.name,
            "context": number_format(engine.context_tokens, force_grouping=True),
            "room": number_format(max(room, 0), force_grouping=True),
            "reply": number_format(resolved.settings.max_tokens, force_grouping=True),
        }
        text = (
            _(
                "This message is %(needed)s tokens (%(parts)s); %(model)s reads %(context)s at "
                "most, and %(room)s are left for a message once its reply (%(reply)s) and the "
                "system prompt have theirs. Nothing was sent: take a file out, or send a shorter one."
            )
            if counts_exactly(engine)
            else _(
                "This message is about %(needed)s tokens (%(parts)s); %(model)s reads %(context)s "
                "at most, and %(room)s are left for a message once its reply (%(reply)s) and the "
                "system prompt have theirs. Nothing was sent: take a file out, or send a shorter one."
            )
        )
        raise AttachmentsRefused(text % numbers)


def attach(message: Message, ids: Sequence[uuid.UUID], resolved: Resolved) -> None:
    """Move the composer's files onto `message` (in the send's transaction), or refuse."""
    waiting = _waiting(message.conversation, ids)
    if not resolved.model.vision and waiting.filter(kind__startswith="image/").exists():
        raise AttachmentsRefused(
            _("%(model)s does not read images: take them out, or pick a model that does.")
            % {"model": resolved.model.name}
        )
    size = waiting.aggregate(size=Sum("size"))["size"] or 0
    if size > settings.CHAT_ATTACHMENT_MAX_MESSAGE_BYTES:
        raise AttachmentsRefused(
            _("This message's files are %(size)s together; a message may carry %(limit)s.")
            % {
                "size": size_in_words(size),
                "limit": size_in_words(settings.CHAT_ATTACHMENT_MAX_MESSAGE_BYTES),
            }
        )
    for position, attachment_id in enumerate(ids):
        moved = waiting.filter(pk=attachment_id).update(message=message, position=position)
        if not moved:
            raise AttachmentsRefused(str(GONE))


def carry_over(source_id: int, message: Message) -> list[Attachment]:
    """Give `message` (a new version of message `source_id`) the files of its source: rows of
    their own, over the same stored files (deleted with the conversation, as the source's are).
    Returns them."""
    copies = [
        Attachment(
            owner_id=attachment.owner_id,
            conversation_id=attachment.conversation_id,
            message=message,
            name=attachment.name,
            kind=attachment.kind,
            size=attachment.size,
            file=attachment.file.name,
            text=attachment.text,
            tokens=attachment.tokens,
            tokens_estimated=attachment.tokens_estimated,
            counted_for=attachment.counted_for,
            position=attachment.position,
        )
        for attachment in Attachment.objects.filter(
            message_id=source_id, conversation_id=message.conversation_id
        )
    ]
    return Attachment.objects.bulk_create(copies) if copies else []


def _waiting(conversation: Conversation, ids: Sequence[uuid.UUID]) -> AttachmentQuerySet:
    return Attachment.objects.pending().filter(
        owner_id=conversation.owner_id, conversation_id=conversation.pk, pk__in=list(ids)
    )


def _tokens(attachment: Attachment, resolved: Resolved) -> int:
    """What the file costs this model: as counted when it came, if that was for this model."""
    if attachment.is_image or attachment.counted_for == resolved.model.engine_key:
        return attachment.tokens
    part = prompt.attachment_part(attachment.name, attachment.get_kind_display(), attachment.text)
    return resolved.engine.count_tokens(part)

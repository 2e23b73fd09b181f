"""A send's two writing steps: save its messages (one transaction), then plan its reply.

Refusals hold across processes: the database's unique constraints allow one active reply per
conversation and one message per idempotency key, and the owner's row is locked while the
per-user limits are counted, so concurrent sends of one user are counted one after another.
Nothing slow happens under that lock: the prompt (which may load the model's tokenizer) is built
by the generation once the send is committed.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone

from conversations import engines
from conversations.events.protocol import Started, message_payload
from conversations.generation.placement import Place, Turn, place, shown_leaf
from conversations.generation.plans import ReplyPlan
from conversations.generation.resolve import CallSettings, Resolved
from conversations.models import Conversation, Message
from conversations.services import branches, prompt
from conversations.services.errors import DuplicateSend, ReplyInProgress
from conversations.services.limits import check_send_allowed, send_accepted


@dataclass(frozen=True)
class Saved:
    """What a send wrote: its user message (None for a turn that adds a reply only), its
    pending reply, where they went, and the conversation's title after it."""

    user_message: Message | None
    reply: Message
    place: Place
    title: str


def save(
    *, conversation: Conversation, turn: Turn, idempotency_key: str, resolved: Resolved
) -> Saved:
    """The send's messages, under the owner's lock: refused (nothing written) by a limit, a key
    sent before, or a reply still being written. The new messages continue the branch shown,
    or start a new one from the message edited or the reply regenerated; the branch they make
    is the one shown after, and the model they use is the conversation's from now on."""
    with transaction.atomic():
        owner = get_user_model().objects.select_for_update().get(pk=conversation.owner_id)
        where = place(conversation, turn, shown_leaf(conversation))
        check_send_allowed(owner, conversation=conversation, idempotency_key=idempotency_key)
        user_message = None
        if where.has_user_message:
            user_message = _user_message(conversation, where, turn.content, idempotency_key)
        # A turn without a user message keeps its key on the reply: a double click on
        # Regenerate starts one reply.
        reply_key = "" if user_message else idempotency_key
        parent = user_message.pk if user_message else where.reply_parent
        reply = _pending_reply(conversation, parent, where.prefix, reply_key, resolved)
        # Counted here, still under the owner's lock: only a send that nothing refused counts.
        send_accepted(owner)
        if user_message is not None:
            # Conditional: this socket's copy may predate a rename in another tab.
            Conversation.objects.filter(pk=conversation.pk, title="", title_is_custom=False).update(
                title=Conversation.first_words(turn.content)
            )
        # The model picked for this send is the conversation's from now on, in every tab, and
        # the branch the new messages make is the one shown.
        Conversation.objects.filter(pk=conversation.pk).update(
            updated_at=timezone.now(), model_slug=resolved.model.slug, current_leaf=reply
        )
        title = Conversation.objects.values_list("title", flat=True).get(pk=conversation.pk)
        if user_message is not None:
            user_message.version = branches.version_of(user_message)
            # The only reply to a message made a moment ago: no query needed.
            reply.version = branches.ONLY_VERSION
        else:
            reply.version = branches.version_of(reply)
    return Saved(user_message=user_message, reply=reply, place=where, title=title)


def _user_message(conversation: Conversation, where: Place, content: str, key: str) -> Message:
    try:
        with transaction.atomic():
            return Message.objects.create(
                conversation=conversation,
                parent_id=where.user_parent,
                role=Message.Role.USER,
                content=content,
                idempotency_key=key,
            )
    except IntegrityError:
        raise DuplicateSend("This message was already sent.") from None


def _pending_reply(
    conversation: Conversation, parent: int | None, prefix: str, key: str, resolved: Resolved
) -> Message:
    """The reply row, pending; `key`: the send's idempotency key when it has no user message."""
    try:
        with transaction.atomic():
            return Message.objects.create(
                conversation=conversation,
                parent_id=parent,
                role=Message.Role.ASSISTANT,
                status=Message.Status.PENDING,
                content=prefix,
                idempotency_key=key,
                engine=resolved.engine.name,
                model=resolved.engine.model,
                model_slug=resolved.model.slug,
                system_prompt=resolved.settings.system_prompt,
                temperature=resolved.settings.temperature,
                max_tokens=resolved.settings.max_tokens,
                request_id=uuid.uuid4().hex,
                heartbeat_at=timezone.now(),
            )
    except IntegrityError:
        # A turn without a user message put its key on the reply: the same key again is a
        # repeat (a double click), not a second reply.
        if key and Message.objects.filter(conversation=conversation, idempotency_key=key).exists():
            raise DuplicateSend("This was already sent.") from None
        raise ReplyInProgress(
            "A reply is still being written. Wait for it or press Stop, then send again."
        ) from None


def plan(
    *, conversation: Conversation, saved: Saved, resolved: Resolved, call: CallSettings
) -> ReplyPlan:
    """The committed send as its generation needs it: the history before the reply, and the
    Started event its tabs render without a query. Read after the commit: the owner's row is
    not held while the history is read."""
    reply, user_message = saved.reply, saved.user_message
    history = prompt.load_history(conversation.id, leaf=reply.parent_id)
    return ReplyPlan(
        conversation_id=conversation.id,
        group=conversation.group_name,
        message_id=reply.pk,
        request_id=reply.request_id,
        model=resolved.model,
        settings=resolved.settings,
        prefix=saved.place.prefix,
        started=Started(
            message_id=reply.pk,
            conversation_id=str(conversation.id),
            title=saved.title,
            user_message=message_payload(user_message) if user_message else None,
            message=message_payload(reply),
            model_loading=engines.load_state(resolved.model) != "ready",
            after=saved.place.after,
        ),
        history=history,
        top_p=call.top_p,
        stop=call.stop,
        seed=call.seed,
        title_by_model=call.title_by_model,
    )

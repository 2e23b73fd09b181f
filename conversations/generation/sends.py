"""A send's two steps: save its messages (one transaction), then plan its reply.

Refusals hold across processes: the owner's row is locked while the send is checked (its
session, its model, the per-user limits) and saved, so concurrent sends of one user go one after
another, and the database's unique constraints allow one active reply per conversation and one
message per idempotency key whatever else writes. Nothing slow happens under that lock: the
prompt (which may load the model's tokenizer) is built by the generation once the send is
committed. A crowd of sends waits for each other's queries, so the save makes few: the owner's
and the conversation's rows, the catalogue, one count for the limits, the rows it writes.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from conversations import engines
from conversations.events.payloads import message_payload
from conversations.events.protocol import Started
from conversations.generation import attached
from conversations.generation.placement import Place, Turn, place, shown_leaf
from conversations.generation.plans import ReplyPlan
from conversations.generation.recovery import replies_mark_interrupted, stale_heartbeat
from conversations.generation.resolve import CallSettings, Resolved, resolve
from conversations.models import Conversation, Message
from conversations.services import branches, budgets, limits, prompt, sessions
from conversations.services.errors import (
    ConversationGone,
    DuplicateSend,
    ReplyInProgress,
    SendRefused,
    SessionEnded,
)
from conversations.services.plain import first_words
from conversations.types import User


@dataclass(frozen=True)
class Send:
    """One send: the turn it asks for in `conversation`, and who asks.

    `model_slug`: the model to use (it becomes the conversation's), else the conversation's.
    `attachment_ids`: files waiting in the conversation's composer, sent with the message.
    `user_id`: the sender, whose session `session_key` must still sign them in (a socket's
    send; None: no check). `call`: an API call's own settings (the gateway).
    """

    conversation: Conversation
    turn: Turn
    idempotency_key: str = ""
    model_slug: str = ""
    attachment_ids: tuple[uuid.UUID, ...] = ()
    session_key: str | None = None
    user_id: int | None = None
    call: CallSettings = field(default_factory=CallSettings)


@dataclass(frozen=True)
class Saved:
    """What a send wrote: its user message (None for a turn that adds a reply only), its
    pending reply, where they went, the conversation's title after it, and what writes the
    reply."""

    user_message: Message | None
    reply: Message
    place: Place
    title: str
    resolved: Resolved


# What a send reads of its conversation, locked: the socket's copy may predate a rename, a
# change of model or settings, or a switch of branch in another tab.
CHOSEN = (
    "current_leaf",
    "title",
    "title_is_custom",
    "owner",
    "model_slug",
    "system_prompt",
    "temperature",
    "max_tokens",
)


def save(send: Send) -> Saved:
    """The send's messages, or a refusal with nothing written: its session ended (SessionEnded),
    the conversation deleted, its model not for the owner, a limit, a key sent before, or a
    reply still being written. The new messages continue the branch shown, or start a new one
    from the message edited or the reply regenerated; the branch they make is the one shown
    after, and the model they use is the conversation's from now on."""
    conversation = send.conversation
    if send.attachment_ids and not _sent_before(conversation, send.idempotency_key):
        # Counted before the locks: a tokenizer may have to load. (A send made before, whose
        # files its message holds now, is refused as the repeat it is, below.)
        attached.check_fit(
            conversation,
            send.attachment_ids,
            content=send.turn.content,
            model_slug=send.model_slug,
            call=send.call,
        )
    try:
        with transaction.atomic():
            owner = get_user_model().objects.select_for_update().get(pk=conversation.owner_id)
            if send.user_id is not None and not sessions.session_signs_in(
                send.session_key, send.user_id, user=owner
            ):
                raise SessionEnded
            chosen = _chosen(conversation)
            resolved = resolve(
                owner=owner, chosen=chosen, model_slug=send.model_slug, call=send.call
            )
            where = place(conversation, send.turn, shown_leaf(chosen))
            limits.check_send_allowed(owner, _counts(owner, conversation, send.idempotency_key))
            budgets.check_budget(owner)
            saved = _write(send, chosen, where, resolved)
            # Counted here, still under the owner's lock: only a send that nothing refused counts.
            limits.send_accepted(owner)
    except IntegrityError as exc:
        # The checks above saw neither; a writer that does not take the owner's lock did.
        raise _refusal(conversation, send.idempotency_key) or exc from None
    _place_among_versions(saved)
    return saved


def _write(send: Send, chosen: Conversation, where: Place, resolved: Resolved) -> Saved:
    conversation, turn, key = send.conversation, send.turn, send.idempotency_key
    user_message = None
    if where.has_user_message:
        user_message = _user_message(conversation, where, turn.content, key)
        user_message.shown_attachments = []
        if send.attachment_ids:
            attached.attach(user_message, send.attachment_ids, resolved)
            branches.with_attachments([user_message])
        elif turn.kind == "edit" and turn.message_id is not None:
            # An edited message keeps the files of the version it rewrites.
            user_message.shown_attachments = attached.carry_over(turn.message_id, user_message)
    # A turn without a user message keeps its key on the reply: a double click on Regenerate
    # starts one reply.
    reply_key = "" if user_message else key
    parent = user_message.pk if user_message else where.reply_parent
    reply = _pending_reply(conversation, parent, where.prefix, reply_key, resolved)
    title = chosen.title
    if user_message is not None and not title and not chosen.title_is_custom:
        title = first_words(turn.content or _first_attachment_name(user_message))
    # The model picked for this send is the conversation's from now on, in every tab, and the
    # branch the new messages make is the one shown.
    Conversation.objects.filter(pk=conversation.pk).update(
        updated_at=timezone.now(), model_slug=resolved.model.slug, current_leaf=reply, title=title
    )
    if where.replaces is not None:
        # A retry's failed version goes (not shown any more: the new reply is the leaf now).
        Message.objects.filter(pk=where.replaces, status=Message.Status.ERROR).delete()
    return Saved(user_message, reply, place=where, title=title, resolved=resolved)


def _sent_before(conversation: Conversation, key: str) -> bool:
    return (
        bool(key)
        and Message.objects.filter(conversation=conversation, idempotency_key=key).exists()
    )


def _first_attachment_name(message: Message) -> str:
    """A message of files only is named after its first."""
    return message.shown_attachments[0].name if message.shown_attachments else ""


def _place_among_versions(saved: Saved) -> None:
    """The new messages' versions, read after the commit: the owner's row is held no longer
    than the limits need (an API client's calls at once wait for it one after another)."""
    if saved.user_message is not None:
        saved.user_message.version = branches.version_of(saved.user_message)
        # The only reply to a message made a moment ago: no query needed.
        saved.reply.version = branches.ONLY_VERSION
    else:
        saved.reply.version = branches.version_of(saved.reply)


def _chosen(conversation: Conversation) -> Conversation:
    """The conversation's row, locked for the send (after the owner's: always in that order)."""
    chosen = Conversation.objects.select_for_update().only(*CHOSEN).filter(pk=conversation.pk)
    row = chosen.first()
    if row is None:
        raise ConversationGone(_("This conversation has been deleted."))
    return row


def _counts(owner: User, conversation: Conversation, key: str) -> limits.SendCounts:
    """The counts the limits judge; replies whose process died would count against them and
    block this conversation until the next restart: any are settled first."""

    def count() -> limits.SendCounts:
        stale = stale_heartbeat(timezone.now())
        return limits.send_counts(
            owner, conversation=conversation, idempotency_key=key, stale=stale
        )

    counts = count()
    if counts.stale and replies_mark_interrupted(owner_id=owner.pk):
        counts = count()
    return counts


def _user_message(conversation: Conversation, where: Place, content: str, key: str) -> Message:
    return Message.objects.create(
        conversation=conversation,
        parent_id=where.user_parent,
        role=Message.Role.USER,
        content=content,
        idempotency_key=key,
    )


def _pending_reply(
    conversation: Conversation, parent: int | None, prefix: str, key: str, resolved: Resolved
) -> Message:
    """The reply row, pending; `key`: the send's idempotency key when it has no user message."""
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
        model_name=engines.shown_name(resolved.model),
        system_prompt=resolved.settings.system_prompt,
        temperature=resolved.settings.temperature,
        max_tokens=resolved.settings.max_tokens,
        request_id=uuid.uuid4().hex,
        heartbeat_at=timezone.now(),
    )


def _refusal(conversation: Conversation, key: str) -> SendRefused | None:
    """What a unique constraint refused, read after the rollback: the key again (a repeat, not
    a second reply: a double click), or a second reply being written in the conversation."""
    messages = Message.objects.filter(conversation=conversation)
    if key and messages.filter(idempotency_key=key).exists():
        return DuplicateSend(_("This message was already sent."))
    if messages.active().exists():
        return ReplyInProgress(limits.REPLY_IN_PROGRESS)
    return None


def plan(*, conversation: Conversation, saved: Saved, call: CallSettings) -> ReplyPlan:
    """The committed send as its generation needs it: the history before the reply, and the
    Started event its tabs render without a query. Read after the commit: the owner's row is
    not held while the history is read."""
    reply, user_message, resolved = saved.reply, saved.user_message, saved.resolved
    history = prompt.load_history(
        conversation.id,
        leaf=reply.parent_id,
        images=resolved.model.vision,
        tools=resolved.model.tools,
    )
    return ReplyPlan(
        conversation_id=conversation.id,
        owner_id=conversation.owner_id,
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
        tools=call.tools,
        tool_choice=call.tool_choice,
        title_by_model=call.title_by_model,
        temporary=conversation.temporary,
    )

"""The generation service's API: create and start a reply, and cancel one from anywhere."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import ParamSpec, TypeVar

from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.db import IntegrityError, connections, transaction
from django.utils import timezone

from conversations import engines
from conversations.engines import catalogue, get_engine, specs
from conversations.engines.base import Engine
from conversations.events import broadcast
from conversations.events.protocol import Cancel, Started, Sync, message_payload
from conversations.generation import rows
from conversations.generation.recovery import replies_mark_interrupted
from conversations.generation.runner import Generation, ReplyPlan, running_here
from conversations.models import Conversation, Message
from conversations.services import branches, prompt, sessions
from conversations.services.errors import (
    ConversationGone,
    DuplicateSend,
    EngineUnavailable,
    ModelUnavailable,
    NothingToCancel,
    NothingToRedo,
    ReplyInProgress,
    SessionEnded,
)
from conversations.services.limits import check_send_allowed, send_accepted
from conversations.types import AnyUser

logger = logging.getLogger("chatsite.generation")

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


@dataclass(frozen=True)
class Turn:
    """What a send asks for: a new message (`send`), another version of the last reply
    (`regenerate`, also Retry after a failure), a new version of one of the user's messages and
    a reply to it (`edit`), or the last reply carried on from where it was cut off (`continue`).
    Each starts a reply under the same rules: one at a time per conversation, the same limits."""

    kind: str = "send"
    content: str = ""  # send, edit
    message_id: int | None = None  # edit: the user message it is a new version of


@dataclass(frozen=True)
class CallSettings:
    """One API call's own settings (the OpenAI-compatible gateway), for its reply only: each set
    one wins over the conversation's, within the model's bounds as the conversation's are."""

    system_prompt: str | None = None  # None: the conversation's
    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    stop: tuple[str, ...] = ()
    seed: int | None = None
    title_by_model: bool = True  # see ReplyPlan.title_by_model


def reply_create(
    *,
    conversation: Conversation,
    content: str = "",
    turn: Turn | None = None,
    idempotency_key: str = "",
    model_slug: str = "",
    session_key: str | None = None,
    user_id: int | None = None,
    call: CallSettings | None = None,
) -> ReplyPlan:
    """Save the user's message (if the turn has one) and a pending reply, or refuse the send.

    The new messages continue the branch shown (see services.branches), or start a new one from
    the message edited or the reply regenerated; the branch they make is the one shown after.
    The reply uses the model `model_slug` (which becomes the conversation's model), or the
    conversation's, and the conversation's system prompt and sampling within that model's bounds.

    With `user_id`, first check that `session_key` still signs that user in (SessionEnded if
    not): a socket's send makes one trip to the database thread, not one per step, since under
    a crowd of sends each trip waits behind all the others.

    Refusals hold across processes: the database's unique constraints allow one active reply per
    conversation and one message per idempotency key, and the owner's row is locked while the
    per-user limits are counted, so concurrent sends of one user are counted one after another.
    Nothing slow happens under that lock: the prompt (which may load the model's tokenizer) is
    built by the generation once the send is committed.
    """
    turn = turn or Turn("send", content)
    call = call or CallSettings()
    if user_id is not None and not sessions.session_signs_in(session_key, user_id):
        raise SessionEnded
    choices = (
        Conversation.objects.filter(pk=conversation.pk)
        .values("model_slug", "system_prompt", "temperature", "max_tokens")
        .first()
    )
    if choices is None:
        raise ConversationGone("This conversation has been deleted.")
    owner = get_user_model().objects.get(pk=conversation.owner_id)
    spec = _available_model(owner, model_slug or choices["model_slug"])
    engine = _available_engine(spec)
    used = specs.reply_settings(
        spec,
        system_prompt=_first_set(call.system_prompt, choices["system_prompt"]),
        temperature=_first_set(call.temperature, choices["temperature"]),
        max_tokens=_first_set(call.max_tokens, choices["max_tokens"]),
    )
    # Replies whose process died would otherwise count against the limits and block this
    # conversation until the next restart: settle every stale one of this owner first.
    replies_mark_interrupted(owner_id=conversation.owner_id)
    with transaction.atomic():
        owner = get_user_model().objects.select_for_update().get(pk=conversation.owner_id)
        leaf_id = (
            Conversation.objects.filter(pk=conversation.pk)
            .values_list("current_leaf_id", flat=True)
            .first()
        )
        if leaf_id is None:
            if not Conversation.objects.filter(pk=conversation.pk).exists():
                raise ConversationGone("This conversation has been deleted.")
            leaf_id = branches.link_as_a_line(conversation.pk)  # messages written as a list
        place = _place(conversation, turn, leaf_id)
        check_send_allowed(owner, conversation=conversation, idempotency_key=idempotency_key)
        user_message = None
        if place.user_parent is not _NO_USER_MESSAGE:
            try:
                with transaction.atomic():
                    user_message = Message.objects.create(
                        conversation=conversation,
                        parent_id=place.user_parent,
                        role=Message.Role.USER,
                        content=turn.content,
                        idempotency_key=idempotency_key,
                    )
            except IntegrityError:
                raise DuplicateSend("This message was already sent.") from None
        try:
            with transaction.atomic():
                reply = Message.objects.create(
                    conversation=conversation,
                    parent_id=user_message.pk if user_message else place.reply_parent,
                    role=Message.Role.ASSISTANT,
                    status=Message.Status.PENDING,
                    content=place.prefix,
                    # A turn without a user message keeps its key on the reply: a double click
                    # on Regenerate starts one reply.
                    idempotency_key="" if user_message else idempotency_key,
                    engine=engine.name,
                    model=engine.model,
                    model_slug=spec.slug,
                    system_prompt=used.system_prompt,
                    temperature=used.temperature,
                    max_tokens=used.max_tokens,
                    request_id=uuid.uuid4().hex,
                    heartbeat_at=timezone.now(),
                )
        except IntegrityError:
            # A turn without a user message put its key on the reply: the same key again is a
            # repeat (a double click), not a second reply.
            if (
                user_message is None
                and idempotency_key
                and Message.objects.filter(
                    conversation=conversation, idempotency_key=idempotency_key
                ).exists()
            ):
                raise DuplicateSend("This was already sent.") from None
            raise ReplyInProgress(
                "A reply is still being written. Wait for it or press Stop, then send again."
            ) from None
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
            updated_at=timezone.now(), model_slug=spec.slug, current_leaf=reply
        )
        title = Conversation.objects.values_list("title", flat=True).get(pk=conversation.pk)
        if user_message is not None:
            user_message.version = branches.version_of(user_message)
            # The only reply to a message made a moment ago: no query needed.
            reply.version = branches.ONLY_VERSION
        else:
            reply.version = branches.version_of(reply)
    # Read after the commit: the owner's row is not held while the history is read.
    history = prompt.load_history(conversation.id, leaf=reply.parent_id)
    return ReplyPlan(
        conversation_id=conversation.id,
        group=conversation.group_name,
        message_id=reply.pk,
        request_id=reply.request_id,
        model=spec,
        settings=used,
        prefix=place.prefix,
        started=Started(
            message_id=reply.pk,
            conversation_id=str(conversation.id),
            title=title,
            user_message=message_payload(user_message) if user_message else None,
            message=message_payload(reply),
            model_loading=engines.load_state(spec) != "ready",
            after=place.after,
        ),
        history=history,
        top_p=call.top_p,
        stop=call.stop,
        seed=call.seed,
        title_by_model=call.title_by_model,
    )


def _first_set(*values: T | None) -> T | None:
    return next((value for value in values if value is not None), None)


_NO_USER_MESSAGE = -1  # a turn that adds a reply only


@dataclass(frozen=True)
class _Place:
    """Where a turn's messages go in the conversation's tree."""

    user_parent: int | None  # the user message's parent (_NO_USER_MESSAGE: no user message)
    reply_parent: int | None = None  # without a user message: the reply's parent
    prefix: str = ""  # continue: the text the new reply starts from
    after: int | None = None  # the last message the tabs keep showing

    @classmethod
    def reply_only(cls, parent: int | None, prefix: str = "") -> _Place:
        return cls(_NO_USER_MESSAGE, reply_parent=parent, prefix=prefix, after=parent)


def _place(conversation: Conversation, turn: Turn, leaf_id: int | None) -> _Place:
    if turn.kind == "send":
        return _Place(user_parent=leaf_id, after=leaf_id)
    if turn.kind == "edit":
        edited = Message.objects.filter(
            pk=turn.message_id or 0, conversation=conversation, role=Message.Role.USER
        ).first()
        if edited is None:
            raise branches.NotOnThisConversation("There is no such message of yours to edit.")
        return _Place(user_parent=edited.parent_id, after=edited.parent_id)
    leaf = Message.objects.filter(pk=leaf_id).first() if leaf_id is not None else None
    if leaf is None:
        raise NothingToRedo("There is no reply to do again yet.")
    if turn.kind == "regenerate":
        parent = leaf.parent_id if leaf.role == Message.Role.ASSISTANT else leaf.pk
        return _Place.reply_only(parent)
    if turn.kind == "continue":
        if not leaf.can_continue:
            raise NothingToRedo("Only a reply that was cut off or stopped can be continued.")
        return _Place.reply_only(leaf.parent_id, prefix=leaf.content)
    raise ValueError(f"unknown turn {turn.kind!r}")


def _available_model(owner: AnyUser, slug: str) -> specs.ModelSpec:
    try:
        return catalogue.model_for(owner, slug)
    except specs.ModelUnavailable as exc:
        raise ModelUnavailable(f"{exc} Pick another model; your message was not sent.") from None


def _available_engine(spec: specs.ModelSpec) -> Engine:
    """The model's engine, or a refusal the sender can read (the socket stays open)."""
    try:
        return get_engine(spec)
    except ImproperlyConfigured as exc:
        logger.error("the model %s is not available: %s", spec.slug, exc)
        raise EngineUnavailable(
            "The model is not available right now. Your message was not sent; try again later."
        ) from None


async def reply_start(
    *,
    conversation: Conversation,
    content: str = "",
    turn: Turn | None = None,
    idempotency_key: str = "",
    model_slug: str = "",
    session_key: str | None = None,
    user_id: int | None = None,
) -> Generation:
    """Save a send and start streaming its reply in this process (see reply_create)."""
    return await reply_start_with(
        functools.partial(
            reply_create,
            conversation=conversation,
            content=content,
            turn=turn,
            idempotency_key=idempotency_key,
            model_slug=model_slug,
            session_key=session_key,
            user_id=user_id,
        )
    )


async def reply_start_with(save: Callable[[], ReplyPlan]) -> Generation:
    """Save a send with `save` (reply_create, or a caller's transaction around it: the gateway
    saves a new conversation and its history with the send, all or nothing) on a send thread,
    then start streaming its reply in this process. The generation's task has not run yet when
    this returns: a reader added to its listeners then hears every event."""
    plan = await _on_a_send_thread(save)
    logger.info("send accepted request_id=%s message=%s", plan.request_id, plan.message_id)
    return Generation.start(plan)


_send_threads: ThreadPoolExecutor | None = None


async def _on_a_send_thread(function: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """`function` on one of CHAT_SEND_THREADS threads; on the database thread if there are none.

    Channels' one database thread runs every flush, history read and lookup of the process: a
    crowd of sends queued there waits for each other's round trips to PostgreSQL, one at a time.
    """
    global _send_threads
    if not settings.CHAT_SEND_THREADS:
        result: R = await database_sync_to_async(function)(*args, **kwargs)
        return result
    if _send_threads is None:
        _send_threads = ThreadPoolExecutor(
            settings.CHAT_SEND_THREADS, thread_name_prefix="chatsite-send"
        )
    call = functools.partial(_with_own_connection, function, *args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(_send_threads, call)


def finish_sends() -> None:
    """Wait for the sends being saved on send threads, and let their threads go (in tests, so
    that no send of one test writes into the next, or holds a connection at the end)."""
    global _send_threads
    if _send_threads is not None:
        _send_threads.shutdown(wait=True)
        _send_threads = None


def _with_own_connection(function: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """Run on a send thread with the thread's own connection, given back to the pool after.

    Not through database_sync_to_async: that runs the function in a copy of the caller's
    context, where Django's connections live, and then closes the thread's own connections,
    which the function never used, so the one it did use stayed open.
    """
    try:
        return function(*args, **kwargs)
    finally:
        connections.close_all()


async def reply_stop_now(
    *, conversation: Conversation, message_id: int, cancelled_by: str
) -> Cancel:
    """Tell the generation writing this reply to stop, before anything is written: straight from
    here when it runs in this process, else through the conversation's group.

    A tab knows the reply it shows being written, so its Stop need not wait for the row's write,
    which waits for the database thread (under load, busy with other replies' flushes). Record
    the Stop afterwards with reply_cancel(already_sent=...).
    """
    stop = Cancel(message_id=message_id, requested_at=time.time(), cancelled_by=cancelled_by)
    generation = running_here(message_id)
    if generation is not None:
        await generation.request_stop(
            rows.RecordedStop(rows.unix_time(stop.requested_at), cancelled_by)
        )
    else:
        await broadcast.to_group(conversation.group_name, stop)
    return stop


async def reply_sync(*, conversation: Conversation, message_id: int, reply_channel: str) -> None:
    """Ask the generation writing this reply to send one tab (`reply_channel`) the text so far:
    straight from here when it runs in this process, so a layer that drops messages (a full
    channel) cannot lose the request, else through the conversation's group."""
    generation = running_here(message_id)
    if generation is not None:
        generation.snapshot_to(reply_channel)
    else:
        sync = Sync(message_id=message_id, reply_channel=reply_channel)
        await broadcast.to_group(conversation.group_name, sync)


async def reply_cancel(
    *, conversation: Conversation, cancelled_by: str, already_sent: Cancel | None = None
) -> None:
    """Ask the conversation's running generation, wherever it runs, to stop.

    The request goes to the conversation's group, which reaches the generation at once, and into
    the reply's row, which the generation reads at every flush: a group message can be lost (a
    full channel, a Redis restart, a generation that has not joined its group yet), the row not.
    `already_sent`: the Stop reply_stop_now sent a moment ago, now only recorded.
    """
    requested_at = already_sent.requested_at if already_sent is not None else time.time()
    try:
        message_id = await database_sync_to_async(_record_stop)(
            conversation, cancelled_by, requested_at
        )
    except NothingToCancel:
        if already_sent is None:
            raise
        return  # the reply has ended since: stopped by that Stop, or just finished
    logger.info("cancel requested message=%s by=%s", message_id, cancelled_by)
    if already_sent is None or already_sent.message_id != message_id:
        stop = Cancel(message_id=message_id, requested_at=requested_at, cancelled_by=cancelled_by)
        await broadcast.to_group(conversation.group_name, stop)


def _record_stop(conversation: Conversation, cancelled_by: str, requested_at: float) -> int:
    active = (
        Message.objects.filter(conversation=conversation)
        .active()
        .values_list("pk", flat=True)
        .first()
    )
    if active is None:
        raise NothingToCancel("Nothing is being written right now.")
    rows.record_stop(active, cancelled_by, rows.unix_time(requested_at))
    return active

"""An API call through the generation lifecycle, and its reply as the HTTP response reads it.

A call is saved as the chat page's sends are, with more around it in the same transaction: a new
conversation (origin "api", with the client's User-Agent) and the request's earlier messages as
its history, then reply_create's user message and pending reply; a refused send (a limit, a
model) leaves nothing behind, and gives back the new conversation it counted against the rate.
With X-Chatsite-Conversation the call goes on in an existing conversation of the caller's
instead: the stored conversation is the history (the branch shown, as the chat page gives the
model), and only the request's last message is added; the request's system message and sampling
apply to that reply alone.

The reply is then an ordinary generation in this process: tabs on the conversation see it stream
and can stop it. The response reads it from the generation directly (RunningReply.listen:
nothing lost, nothing through the channel layer), and a response that ends before the reply (the client
closed the stream or went away) stops the engine, recorded as cancelled by `client_disconnect`.

CHAT_GATEWAY_RECORD=0 keeps no transcript: the conversation lives only while its reply is
written (the lifecycle needs its rows: Stop, heartbeat, recovery, the per-user limits) and is
deleted once the generation has ended; the metrics (Prometheus, the log) stay. A process killed
mid-call leaves that conversation behind, marked interrupted like any other reply's.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import itertools
import logging
import time
import uuid
from collections.abc import Coroutine, Iterator
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.db import transaction

from conversations.attachments import uploads
from conversations.engines.base import ChatMessage
from conversations.engines.specs import ModelSpec
from conversations.events.protocol import Delta, Event, Finished, MessagePayload
from conversations.gateway.errors import from_refusal
from conversations.gateway.files import ReadFile, ReadFiles
from conversations.gateway.wire import ChatCall
from conversations.generation import replies, rows
from conversations.generation.background import spawn
from conversations.generation.placement import shown_leaf
from conversations.generation.plans import ReplyPlan
from conversations.generation.running import RunningReply
from conversations.models import Attachment, Conversation, Message
from conversations.services.conversations import conversation_delete, conversation_visible
from conversations.services.errors import ConversationGone, SendRefused
from conversations.services.limits import conversation_counted
from conversations.types import User

logger = logging.getLogger("chatsite.gateway")

CLIENT_DISCONNECT = "client_disconnect"  # cancelled_by when the client left mid-reply
MAX_ORIGIN_DETAIL = 300  # Conversation.origin_detail


async def call_start(
    *,
    owner: User,
    call: ChatCall,
    model: ModelSpec,
    conversation_id: uuid.UUID | None,
    client: str,
    files: ReadFiles | None = None,
) -> CallReply:
    """Save the call and start its reply here; a GatewayError if the send is refused."""
    save = functools.partial(
        call_save,
        owner=owner,
        call=call,
        model=model,
        conversation_id=conversation_id,
        client=client,
        files=files or ReadFiles(),
    )
    try:
        running = await replies.reply_start_with(save)
    except SendRefused as refusal:
        raise from_refusal(refusal) from None
    return CallReply(running, record=settings.CHAT_GATEWAY_RECORD)


def call_save(
    *,
    owner: User,
    call: ChatCall,
    model: ModelSpec,
    conversation_id: uuid.UUID | None,
    client: str,
    files: ReadFiles,
) -> ReplyPlan:
    """The call's conversation (new, or the caller's own), history, files and send, all or
    nothing: the files stored for a call that is then refused are deleted again."""
    with _deleted_on_failure() as stored:
        if conversation_id is not None:
            with transaction.atomic():
                found = conversation_visible(user=owner, conversation_id=conversation_id)
                if found is None:
                    raise ConversationGone("There is no such conversation of yours.")
                return _send(found, call, model, _kept(found, files.turn, stored))
        # A new conversation, counted as the chat page's "New conversation" is. Counted outside
        # the transaction: a send refused after (a reply limit, the model) or a failed commit
        # leaves no conversation, and gives its count back.
        with conversation_counted(owner), transaction.atomic():
            conversation = Conversation.objects.create(
                owner=owner,
                origin=Conversation.Origin.API,
                origin_detail=_printable(client)[:MAX_ORIGIN_DETAIL],
                title=Conversation.first_words(call.first_question),
                model_slug=model.slug,
                system_prompt=call.system_prompt,
            )
            saved = _save_line(conversation, call.history, parent_id=None)
            for message, attached in zip(saved, files.history, strict=False):
                _kept(conversation, attached, stored, message=message)
            return _send(conversation, call, model, _kept(conversation, files.turn, stored))


@contextlib.contextmanager
def _deleted_on_failure() -> Iterator[list[Attachment]]:
    """The list of files a call stores: deleted from storage again if the call fails (their
    rows go with its rolled-back transaction)."""
    stored: list[Attachment] = []
    try:
        yield stored
    except BaseException:
        for attachment in stored:
            attachment.file.delete(save=False)
        raise


def _kept(
    conversation: Conversation,
    files: tuple[ReadFile, ...],
    stored: list[Attachment],
    *,
    message: Message | None = None,
) -> tuple[uuid.UUID, ...]:
    """Store a message's files (the new turn's wait for the send, which counts and links them)."""
    for file in files:
        attachment = uploads.keep(
            owner=conversation.owner,
            conversation=conversation,
            name=file.name,
            kind=file.kind,
            data=file.data,
            text=file.text,
            message=message,
        )
        stored.append(attachment)
    return tuple(a.pk for a in stored[-len(files) :]) if files else ()


def _send(
    conversation: Conversation,
    call: ChatCall,
    model: ModelSpec,
    attachment_ids: tuple[uuid.UUID, ...],
) -> ReplyPlan:
    """The call's new turn and its pending reply: a user message, or the tool results that
    answer the conversation's last tool calls (saved on its branch shown; the reply answers
    them)."""
    turn = replies.Turn(content=call.content)
    if call.tool_results:
        shown = Conversation.objects.only("current_leaf").get(pk=conversation.pk)
        _save_line(conversation, call.tool_results, parent_id=shown_leaf(shown))
        turn = replies.Turn(kind="answer")
    return replies.reply_create(
        replies.Send(
            conversation=conversation,
            turn=turn,
            model_slug=model.slug,
            attachment_ids=attachment_ids,
            call=replies.CallSettings(
                system_prompt=call.system_prompt,
                temperature=call.temperature,
                max_tokens=call.max_tokens,
                top_p=call.top_p,
                stop=call.stop,
                seed=call.seed,
                tools=call.tools,
                tool_choice=call.tool_choice,
                # An API client calling in bulk would double the engine's work with titles.
                title_by_model=False,
            ),
        )
    )


def _save_line(
    conversation: Conversation, messages: tuple[ChatMessage, ...], *, parent_id: int | None
) -> list[Message]:
    """The request's messages as one line of the conversation's tree under `parent_id`, shown:
    the send goes on from the last."""
    if not messages:
        return []
    saved = Message.objects.bulk_create(
        Message(
            conversation=conversation,
            role=message.role,
            content=message.content,
            tool_calls=[call.openai() for call in message.tool_calls],
            tool_call_id=message.tool_call_id,
        )
        for message in messages
    )
    saved[0].parent_id = parent_id
    for parent, child in itertools.pairwise(saved):
        child.parent = parent
    Message.objects.bulk_update(saved, ["parent"])
    Conversation.objects.filter(pk=conversation.pk).update(current_leaf=saved[-1])
    return saved


def _printable(text: str) -> str:
    return "".join(char for char in text if char.isprintable())


class CallReply:
    """A call's reply as its response reads it: the text as the generation sends it to every
    tab, then the row as saved."""

    def __init__(self, running: RunningReply, *, record: bool) -> None:
        self.running = running
        self.saved: MessagePayload | None = None  # once over: the row, None if it is gone
        self.over = False
        # At once: the generation's task has not run yet, so no event is missed.
        self._events = running.listen()
        self._record = record
        self._released = False

    @property
    def plan(self) -> ReplyPlan:
        return self.running.plan

    async def next_text(self) -> str | None:
        """The next piece of the reply's text; None once it is over (see `saved`)."""
        while not self.over:
            event: Event | None = await self._events.get()
            if event is None:
                self.over = True
            elif isinstance(event, Delta):
                return event.text
            elif isinstance(event, Finished):
                self.saved = event.message
        return None

    async def release(self) -> None:
        """The response is done with the reply. If the reply is still being written, its client
        went away (closed the stream, disconnected): stop the engine now, for nobody reads on.
        Without recording, the conversation is deleted once the generation has ended."""
        if self._released:
            return
        self._released = True
        self.running.stop_listening(self._events)
        if not self.over:
            logger.info("client went away request_id=%s, stopping", self.plan.request_id)
            stop = rows.RecordedStop(rows.unix_time(time.time()), CLIENT_DISCONNECT)
            await self.running.request_stop(stop)  # as a Stop from a tab in this process
        if not self._record:
            _in_background(_forget(self.running))


_background: set[asyncio.Task[Any]] = set()


def _in_background(work: Coroutine[Any, Any, None]) -> None:
    # In a context of its own: it outlives the request, whose executors end with it.
    spawn(work, keep=_background, name="gateway-forget", context=contextvars.Context())


async def _forget(running: RunningReply) -> None:
    await running.finished()  # the final save first
    try:
        await database_sync_to_async(_delete_conversation)(running.plan.conversation_id)
    except Exception:
        logger.exception("could not delete an unrecorded call's conversation")


def _delete_conversation(conversation_id: uuid.UUID) -> None:
    conversation = Conversation.objects.filter(pk=conversation_id).first()
    if conversation is not None:
        conversation_delete(conversation=conversation)

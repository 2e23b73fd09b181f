"""An API call through the generation lifecycle, and its reply as the HTTP response reads it.

A call is saved as the chat page's sends are, with more around it in the same transaction: a new
conversation (origin "api", with the client's User-Agent and its token) and the request's earlier
messages as its history, then reply_create's user message and pending reply; a refused send (a
limit, a model) leaves nothing behind, and gives back the new conversation it counted against the
rate. A call whose history goes on from a reply of a conversation its token recorded (a front end
sending the whole chat each turn: see continuation) goes on there instead: only what the history
does not share with that branch, and the new turn, are added after it. With X-Chatsite-Conversation
the call goes on in the conversation it names, of the caller's: the stored conversation is the
history (the branch shown, as the chat page gives the model), and only the request's last message
is added. Either way the request's system message and sampling apply to that reply alone.

The reply is read by the response as call_reply.CallReply.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import uuid
from collections.abc import Iterator

from django.db import transaction

from conversations.attachments import uploads
from conversations.engines.base import ChatMessage
from conversations.engines.specs import ModelSpec
from conversations.gateway import continuation
from conversations.gateway.call_reply import CallReply
from conversations.gateway.errors import from_refusal
from conversations.gateway.files import ReadFile, ReadFiles
from conversations.gateway.wire import ChatCall
from conversations.generation import replies
from conversations.generation.placement import shown_leaf
from conversations.generation.plans import ReplyPlan
from conversations.models import ApiToken, Attachment, Conversation, Message
from conversations.services.conversations import conversation_visible
from conversations.services.errors import ConversationGone, SendRefused
from conversations.services.limits import conversation_counted
from conversations.services.plain import first_words

logger = logging.getLogger("chatsite.gateway")

MAX_ORIGIN_DETAIL = 300  # Conversation.origin_detail


async def call_start(
    *,
    token: ApiToken,
    call: ChatCall,
    model: ModelSpec,
    conversation_id: uuid.UUID | None,
    client: str,
    record: bool = True,
    files: ReadFiles | None = None,
) -> CallReply:
    """Save the call of `token` (its `user` loaded) and start its reply here; a GatewayError if
    the send is refused. `record`: keep the call's conversation (False: see call_reply's
    docstring; the view refuses X-Chatsite-Conversation then)."""
    save = functools.partial(
        call_save,
        token=token,
        call=call,
        model=model,
        conversation_id=conversation_id,
        client=client,
        record=record,
        files=files or ReadFiles(),
    )
    try:
        running = await replies.reply_start_with(save)
    except SendRefused as refusal:
        raise from_refusal(refusal) from None
    return CallReply(running, record=record)


def call_save(
    *,
    token: ApiToken,
    call: ChatCall,
    model: ModelSpec,
    conversation_id: uuid.UUID | None,
    client: str,
    record: bool,
    files: ReadFiles,
) -> ReplyPlan:
    """The call's conversation (the one it names, the one its history goes on in, or a new
    one), history, files and send, all or nothing: the files stored for a call that is then
    refused are deleted again."""
    owner = token.user
    with _deleted_on_failure() as stored:
        if conversation_id is not None:
            with transaction.atomic():
                found = conversation_visible(user=owner, conversation_id=conversation_id)
                if found is None:
                    raise ConversationGone("There is no such conversation of yours.")
                return _turn(found, call, model, _kept(found, files.turn, stored), record=record)
        # Unrecorded, a call goes on in nothing: its conversation is deleted after its reply.
        digests = continuation.path_digests(token, call.history) if record else None
        match = None
        if digests is not None:
            match = continuation.find(token=token, history=call.history, digests=digests)
        if match is not None:
            with transaction.atomic():
                going_on = Conversation.objects.filter(pk=match.conversation_id, owner=owner)
                conversation = going_on.first()
                if conversation is not None:  # else deleted since: a new one
                    return _line_and_turn(
                        conversation, call, model, files, stored, digests, after=match
                    )
        # A new conversation, counted as the chat page's "New conversation" is (unless it is
        # deleted after its reply). Counted outside the transaction: a send refused after (a
        # reply limit, the model) or a failed commit leaves no conversation, and gives its
        # count back.
        counted = conversation_counted(owner) if record else contextlib.nullcontext()
        with counted, transaction.atomic():
            conversation = Conversation.objects.create(
                owner=owner,
                origin=Conversation.Origin.API,
                origin_detail=_printable(client)[:MAX_ORIGIN_DETAIL],
                api_token=token,
                title=first_words(call.first_question),
                model_slug=model.slug,
                system_prompt=call.system_prompt,
            )
            return _line_and_turn(conversation, call, model, files, stored, digests, after=None)


def _line_and_turn(
    conversation: Conversation,
    call: ChatCall,
    model: ModelSpec,
    files: ReadFiles,
    stored: list[Attachment],
    digests: list[str] | None,
    *,
    after: continuation.Match | None,
) -> ReplyPlan:
    """The history the conversation does not hold yet (all of it, or what follows the reply
    `after` that it goes on from), with its files, then the send after it. Its messages are
    keyed by their paths if the call is recorded (`digests`: the history's; None: it is not)."""
    shared = after.shared if after is not None else 0
    saved = _save_line(
        conversation, call.history[shared:], parent_id=after.reply_id if after else None
    )
    for message, attached in zip(saved, files.history[shared:], strict=False):
        _kept(conversation, attached, stored, message=message)
    record = digests is not None
    if digests is not None:
        continuation.remember_line(saved, digests[shared:])
    last = saved[-1].pk if saved else (after.reply_id if after else None)
    turn = _kept(conversation, files.turn, stored)
    return _turn(conversation, call, model, turn, after_id=last, record=record)


def _turn(
    conversation: Conversation,
    call: ChatCall,
    model: ModelSpec,
    attachment_ids: tuple[uuid.UUID, ...],
    *,
    after_id: int | None = None,
    record: bool,
) -> ReplyPlan:
    """The call's new turn and its pending reply: a user message after `after_id` (None: the
    branch shown), or the tool results that answer the tool calls of that message (saved after
    it; the reply answers them). The turn is keyed by its path when recorded (its reply is once
    it is saved: CallReply)."""
    if not call.tool_results:
        turn = replies.Turn(content=call.content, after_id=after_id)
        plan = _send(conversation, call, model, attachment_ids, turn)
        user_message = plan.started.user_message
        if record and user_message is not None:
            continuation.remember(user_message["id"])
        return plan
    if after_id is None:
        # Only a call naming its conversation comes here without one: the row read for it, in
        # this transaction, says which branch is shown.
        after_id = shown_leaf(conversation)
    results = _save_line(conversation, call.tool_results, parent_id=after_id)
    if record:
        for result in results:  # each after the one before it: its parent's key comes first
            continuation.remember(result.pk)
    turn = replies.Turn(kind="answer", after_id=results[-1].pk)
    return _send(conversation, call, model, attachment_ids, turn)


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
    turn: replies.Turn,
) -> ReplyPlan:
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

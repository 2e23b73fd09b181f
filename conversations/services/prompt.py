"""What the engine is given for a reply: the system prompt, then as much history as fits, each
user message with the files attached to it."""

from __future__ import annotations

import base64
import logging
import re
import uuid
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from django.conf import settings
from django.db.models import Exists, OuterRef

from conversations.engines.base import ChatMessage, Engine, ToolCall
from conversations.engines.specs import ReplySettings
from conversations.models import Attachment, Message
from conversations.services.branches import path_to

# Replies the model actually produced text for are history; failed empty ones are not.
_HISTORY_STATUSES = (
    Message.Status.COMPLETE,
    Message.Status.CANCELLED,
    Message.Status.INTERRUPTED,
    Message.Status.ERROR,
)
_FRAMING_TOKENS = 4  # what the chat template adds around each message, about
# What an image costs a vision model, about (OpenAI's count for a detailed 512-pixel tile and its
# base): no engine here can say before the send.
IMAGE_TOKENS = 765
logger = logging.getLogger("chatsite.prompt")

# A message and what its text costs in the engine's context (engine.count_tokens).
_Counted = tuple[ChatMessage, int]


@dataclass(frozen=True)
class Prompt:
    """The messages a reply is generated from, and what their text costs (the reply's
    prompt_tokens, which the engine may correct with its own count)."""

    messages: list[ChatMessage]
    tokens: int


def load_history(
    conversation_id: uuid.UUID, *, leaf: int | None, images: bool = False, tools: bool = False
) -> list[ChatMessage]:
    """The branch of the conversation that ends at message `leaf` (a new reply's parent),
    oldest first: the versions the user sees, not the ones they browsed away from. A user
    message carries its attachments' text, and its images where the model reads them
    (`images`; else they are named only). An API caller's tool calls and results go to a model
    that calls tools (`tools`) as such, and to any other as text (see _as_text)."""
    # Whether each message has files is asked in the same query: a send costs no query more
    # in a conversation without any (a crowd of sends waits for each other's queries).
    rows = (
        Message.objects.filter(conversation_id=conversation_id)
        .only(
            "id",
            "parent_id",
            "role",
            "content",
            "status",
            "created_at",
            "tool_calls",
            "tool_call_id",
        )
        .annotate(has_files=Exists(Attachment.objects.filter(message=OuterRef("pk"))))
    )
    branch = path_to(leaf, {message.pk: message for message in rows})
    kept = [
        message
        for message in branch
        if message.role != Message.Role.ASSISTANT
        or (message.status in _HISTORY_STATUSES and (message.content or message.tool_calls))
    ]
    with_files = [message.pk for message in kept if message.has_files]  # type: ignore[attr-defined]
    attached = _attachments_of(with_files)
    sent = _newest_images(kept, attached) if images else None
    history = [_chat_message(message, attached.get(message.pk, []), sent) for message in kept]
    return history if tools else [_as_text(message) for message in history]


def _as_text(message: ChatMessage) -> ChatMessage:
    """A tool call or result as plain text, for a model that is not given tools (one picked
    after an API caller's tool-calling turns): it reads what happened, in roles it knows."""
    if message.role == Message.Role.TOOL:
        return ChatMessage(
            "user", f"Result of tool call {message.tool_call_id}:\n{message.content}"
        )
    if not message.tool_calls:
        return message
    calls = [
        f"Called tool {call.name} ({call.id}) with {call.arguments}" for call in message.tool_calls
    ]
    return ChatMessage(message.role, "\n".join([message.content, *calls]).strip())


def _newest_images(kept: list[Message], attached: dict[int, list[Attachment]]) -> set[object]:
    """The images the prompt carries: the newest CHAT_ATTACHMENTS_PER_MESSAGE of the branch (a
    message's worth). Each is megabytes in the request and hundreds of tokens; older ones are
    named only."""
    newest: list[object] = []
    for message in reversed(kept):
        newest += [a.pk for a in reversed(attached.get(message.pk, [])) if a.is_image]
    return set(newest[: settings.CHAT_ATTACHMENTS_PER_MESSAGE])


def prompt_room(engine: Engine, reply: ReplySettings) -> int:
    """How many tokens a user message may cost in the engine's context: what the reply and the
    system prompt leave of it. Blocking (count_tokens)."""
    room = engine.context_tokens - reply.max_tokens - _FRAMING_TOKENS
    if reply.system_prompt:
        room -= engine.count_tokens(reply.system_prompt) + _FRAMING_TOKENS
    return room


def attachment_part(name: str, kind_label: str, text: str) -> str:
    """An attached file's text as a user message carries it: a line naming the file, then its
    text fenced by more backticks than any run of them in it, so that nothing in the file can
    end its part early or pass for the user's own words."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"Attached file: {name} ({kind_label})\n{fence}\n{text}\n{fence}"


def image_note(name: str, why: str = "not shown to this model") -> str:
    """What a model is told of an image it is not sent."""
    return f"Attached image: {name} ({why})"


def with_attachments(content: str, parts: Iterable[str]) -> str:
    """A user message's text followed by its attachments' parts."""
    return "\n\n".join([content, *parts])


def _attachments_of(message_ids: Iterable[int]) -> dict[int, list[Attachment]]:
    ids = list(message_ids)
    attached: dict[int, list[Attachment]] = defaultdict(list)
    if not ids:
        return attached
    rows = Attachment.objects.filter(message_id__in=ids).defer("counted_for", "created_at")
    for attachment in rows:
        assert attachment.message_id is not None
        attached[attachment.message_id].append(attachment)
    return attached


def _chat_message(
    message: Message, attachments: list[Attachment], sent_images: set[object] | None
) -> ChatMessage:
    """`sent_images`: the images the prompt carries; None: the model reads none."""
    if message.tool_calls or message.role == Message.Role.TOOL:
        calls = tuple(ToolCall.from_openai(item) for item in message.tool_calls)
        return ChatMessage(
            message.role, message.content, tool_calls=calls, tool_call_id=message.tool_call_id
        )
    if not attachments:
        return ChatMessage(role=message.role, content=message.content)
    parts, urls = [], []
    for attachment in attachments:
        if not attachment.is_image:
            parts.append(
                attachment_part(attachment.name, attachment.get_kind_display(), attachment.text)
            )
        elif sent_images is None:
            parts.append(image_note(attachment.name))
        elif attachment.pk not in sent_images:
            parts.append(image_note(attachment.name, "an earlier image, not sent again"))
        elif (url := _data_url(attachment)) is None:
            parts.append(image_note(attachment.name, "its file is missing"))
        else:
            urls.append(url)
    return ChatMessage(
        role=message.role, content=with_attachments(message.content, parts), images=tuple(urls)
    )


def _data_url(attachment: Attachment) -> str | None:
    """The image as a data: URL; None if its stored file is gone (the reply goes on without)."""
    try:
        with attachment.file.open("rb") as stored:
            encoded = base64.b64encode(stored.read()).decode("ascii")
    except OSError:
        logger.warning("the file of attachment %s is missing from storage", attachment.pk)
        return None
    return f"data:{attachment.kind};base64,{encoded}"


def build_prompt(
    *, history: list[ChatMessage], engine: Engine, reply: ReplySettings, prefix: str = ""
) -> Prompt:
    """The prompt of a reply, counted: the system prompt and the history, oldest turns dropped
    first when it would not fit (the newest user message is always kept, and room is left for the
    reply itself), and for a continued reply the text it goes on writing from (`prefix`).

    Counting tokens blocks (a tokenizer, or a request to the model's server): call this off the
    event loop, outside any transaction. Each message is counted once, here, so the stream
    built from it never counts.
    """
    counted = _fitted(history, engine, reply)
    if prefix:  # the model goes on writing the reply it was cut off in
        counted.append((ChatMessage("assistant", prefix), engine.count_tokens(prefix)))
    return Prompt(
        messages=[message for message, _ in counted], tokens=sum(tokens for _, tokens in counted)
    )


def _fitted(history: list[ChatMessage], engine: Engine, reply: ReplySettings) -> list[_Counted]:
    """build_prompt's messages but the prefix, each with its count."""
    system = [ChatMessage("system", reply.system_prompt)] if reply.system_prompt else []
    counted = [(message, engine.count_tokens(message.content)) for message in system]
    budget = engine.context_tokens - reply.max_tokens
    budget -= sum(tokens + _FRAMING_TOKENS for _, tokens in counted)
    kept: list[_Counted] = []
    for message in reversed(history):
        tokens = engine.count_tokens(_counted_text(message)) + IMAGE_TOKENS * len(message.images)
        cost = tokens + _FRAMING_TOKENS
        if kept and cost > budget:
            break
        kept.append((message, tokens))
        budget -= cost
    kept.reverse()
    # A reply may not open the prompt on most chat templates, nor a tool's result without the
    # call it answers: drop them from the front.
    while len(kept) > 1 and kept[0][0].role in (Message.Role.ASSISTANT, Message.Role.TOOL):
        kept.pop(0)
    return counted + kept


def _counted_text(message: ChatMessage) -> str:
    """What of a message takes room in the context: its text, and its tool calls."""
    if not message.tool_calls:
        return message.content
    return " ".join([message.content, *(f"{c.name} {c.arguments}" for c in message.tool_calls)])

"""A conversation's title, written by its model once the first reply is complete.

Until then (and whenever this fails) the title is the first words of the first message, set by
the send. The request is a small one of its own, started after the reply's final event went
out, so it never delays or slows the reply; its answer replaces the title only while nobody has
renamed the conversation (a conditional UPDATE), and a conversation deleted meanwhile simply
matches no row. Every tab of the conversation is told the new title.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from contextlib import aclosing
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings

from conversations import broadcast
from conversations.chat_models import ModelSpec
from conversations.engines import get_engine
from conversations.engines.base import ChatMessage, SamplingParams
from conversations.models import Conversation
from conversations.protocol import TitleChanged

logger = logging.getLogger("chatsite.generation")

INSTRUCTION = (
    "Write a title of at most six words for the conversation below. "
    "Answer with the title only: no quotes, no punctuation at the end."
)
TITLE_TOKENS = 16
TITLE_TIMEOUT_S = 30.0
MAX_TITLE_CHARS = 80
EXCERPT_CHARS = 2000  # of the question and of the reply: a title needs no more

# Strong references: asyncio keeps only weak ones to tasks.
_writing: set[asyncio.Task[Any]] = set()


def wanted(history: list[ChatMessage], prefix: str) -> bool:
    """A title is written after a conversation's first reply (not a continued one)."""
    return settings.CHAT_AUTO_TITLES and not prefix and len(history) == 1


def start(
    *, conversation_id: uuid.UUID, group: str, model: ModelSpec, question: str, reply: str
) -> None:
    task = asyncio.create_task(
        write_title(conversation_id, group, model, question, reply), name="title"
    )
    _writing.add(task)
    task.add_done_callback(_writing.discard)


async def write_title(
    conversation_id: uuid.UUID, group: str, model: ModelSpec, question: str, reply: str
) -> str | None:
    """Ask the model for a title and save it; the title saved, or None (logged) if not."""
    try:
        async with asyncio.timeout(TITLE_TIMEOUT_S):
            text = await _ask(model, question, reply)
    except Exception as exc:
        logger.warning("no title written for conversation %s: %r", conversation_id, exc)
        return None
    title = clean(text)
    if not title:
        return None
    if not await database_sync_to_async(_save)(conversation_id, title):
        return None  # renamed by its owner meanwhile, or deleted
    await broadcast.to_group(group, TitleChanged(message_id=None, title=title))
    return title


async def _ask(model: ModelSpec, question: str, reply: str) -> str:
    conversation = f"User: {question[:EXCERPT_CHARS]}\n\nAssistant: {reply[:EXCERPT_CHARS]}"
    messages = [ChatMessage("system", INSTRUCTION), ChatMessage("user", conversation)]
    params = SamplingParams(max_tokens=TITLE_TOKENS, temperature=0.2)
    stream = get_engine(model).stream(messages, params, request_id=f"title-{uuid.uuid4().hex}")
    async with aclosing(aiter(stream)) as deltas:
        return "".join([delta async for delta in deltas])


def clean(text: str) -> str:
    """The model's answer as a title: its first line, without quotes, a "Title:" label or
    closing punctuation, at most MAX_TITLE_CHARS."""
    line = next((line for line in text.splitlines() if line.strip()), "")
    line = re.sub(r"^\s*(title\s*:)\s*", "", line, flags=re.IGNORECASE)
    line = " ".join(line.strip().strip("\"'`*#").split())
    return line.rstrip(".!:;,")[:MAX_TITLE_CHARS].strip()


def _save(conversation_id: uuid.UUID, title: str) -> bool:
    # Conditional: a title its owner gave is never overwritten, whichever came first.
    return bool(
        Conversation.objects.filter(pk=conversation_id, title_is_custom=False).update(title=title)
    )

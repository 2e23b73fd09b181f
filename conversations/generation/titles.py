"""A conversation's title, written by the title model (CHAT_TITLE_MODEL) once the first reply is
complete.

Until then (and whenever this fails, and always without a title model: the default for the
embedded engine) the title is the first words of the first message, set by the send. The request
is a small one of its own, started after the reply's final event went out, and it gives way to
any reply: a reply starting on the title model's engine in this process stops it first
(`reply_starting`), so a follow-up never waits behind a title. Its answer, cleaned of Markdown,
replaces the title only while nobody has renamed the conversation (a conditional UPDATE).
Deleting the conversation stops the request in the engine, in whichever process it runs: the
title writer listens on the conversation's generation group for the Stop that
services.conversations.conversation_delete sends there. Every tab of the conversation is told
the new title.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing, asynccontextmanager, suppress
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model

from conversations.engines import catalogue, get_engine
from conversations.engines.base import ChatMessage, SamplingParams, StreamResult, token_count
from conversations.engines.specs import ModelSpec
from conversations.events import broadcast, protocol
from conversations.events.protocol import Cancel, TitleChanged
from conversations.generation.background import spawn
from conversations.generation.plans import ReplyPlan
from conversations.models import Conversation
from conversations.services import budgets
from conversations.services.errors import BudgetExhausted
from conversations.services.plain import cut_at_word, plain_text
from conversations.services.text import make_storable

logger = logging.getLogger("chatsite.generation")

INSTRUCTION = (
    "Write a title of at most six words for the conversation below. "
    "Answer with the title only: no quotes, no punctuation at the end."
)
TITLE_TOKENS = 16
TITLE_TIMEOUT_S = 30.0
MAX_TITLE_CHARS = 80
# What a model puts around a title: straight and typographic quotes, and spaces.
QUOTES = "\"'`* \u2018\u2019\u201c\u201d\u00ab\u00bb"
EXCERPT_CHARS = 2000  # of the question and of the reply: a title needs no more

# Strong references: asyncio keeps only weak ones to tasks.
_writing: set[asyncio.Task[Any]] = set()
# The title requests running in this process, by their engine's key: each one's event, set to
# make it give way.
_asking: dict[str, set[asyncio.Event]] = {}


def wanted(plan: ReplyPlan) -> bool:
    """A title is written after a conversation's first reply (not a continued one), unless its
    send asked for none (see ReplyPlan.title_by_model)."""
    return (
        plan.title_by_model
        and settings.CHAT_AUTO_TITLES
        and bool(settings.CHAT_TITLE_MODEL)
        and not plan.prefix
        and len(plan.history) == 1
    )


def start(plan: ReplyPlan, *, reply: str) -> None:
    """Write the title of the first reply `reply` (planned by `plan`) in a task of its own."""
    spawn(_write_with_title_model(plan, reply), keep=_writing, name="title")


def reply_starting(model: ModelSpec) -> None:
    """A reply is starting on `model`'s engine: the title requests running there stop, so that
    it never waits behind one (the embedded engine writes one reply at a time). Their titles
    stay the first words."""
    for give_way in _asking.get(model.engine_key, ()):
        give_way.set()


async def _write_with_title_model(plan: ReplyPlan, reply: str) -> str | None:
    model = await database_sync_to_async(title_model)()
    if model is None:
        return None
    question = plan.history[0].content
    return await write_title(
        plan.conversation_id, plan.group, model, question, reply, owner_id=plan.owner_id
    )


def title_model() -> ModelSpec | None:
    """The model CHAT_TITLE_MODEL names, enabled (declared or an admin's row); None if none."""
    slug = settings.CHAT_TITLE_MODEL
    model = next((m for m in catalogue.all_models() if m.slug == slug and m.enabled), None)
    if model is None and slug:
        logger.warning("CHAT_TITLE_MODEL=%r names no enabled model: titles are first words", slug)
    return model


async def write_title(
    conversation_id: uuid.UUID,
    group: str,
    model: ModelSpec,
    question: str,
    reply: str,
    *,
    owner_id: int,
) -> str | None:
    """Ask the model for a title and save it; the title saved, or None (logged) if not. Its
    tokens are the owner's, as a reply's: none is asked for past their budget."""
    if not await database_sync_to_async(_within_budget)(owner_id):
        return None
    try:
        async with asyncio.timeout(TITLE_TIMEOUT_S):
            text = await _ask(conversation_id, group, model, question, reply, owner_id)
    except Exception as exc:
        logger.warning("no title written for conversation %s: %r", conversation_id, exc)
        return None
    if text is None:
        return None  # the conversation was deleted, or a reply needed the engine
    title = clean(text)
    if not title:
        return None
    if not await database_sync_to_async(_save)(conversation_id, title):
        return None  # renamed by its owner meanwhile, or deleted
    await broadcast.to_group(group, TitleChanged(message_id=None, title=title))
    return title


async def _ask(
    conversation_id: uuid.UUID,
    group: str,
    model: ModelSpec,
    question: str,
    reply: str,
    owner_id: int,
) -> str | None:
    """The model's answer; None if it was stopped first: the conversation was deleted, or a
    reply started on the same engine (see reply_starting)."""
    conversation = f"User: {question[:EXCERPT_CHARS]}\n\nAssistant: {reply[:EXCERPT_CHARS]}"
    messages = [ChatMessage("system", INSTRUCTION), ChatMessage("user", conversation)]
    params = SamplingParams(max_tokens=TITLE_TOKENS, temperature=0.2)
    stream = get_engine(model).stream(messages, params, request_id=f"title-{uuid.uuid4().hex}")
    async with _deletion(conversation_id, group) as stopped:
        giving_way = _asking.setdefault(model.engine_key, set())
        giving_way.add(stopped)
        stopper = asyncio.create_task(_stop_when(stopped, stream.stop))
        try:
            async with aclosing(aiter(stream)) as deltas:
                text = "".join([delta async for delta in deltas])
        finally:
            giving_way.discard(stopped)
            stopper.cancel()
            with suppress(asyncio.CancelledError):
                await stopper
            if stream.result is not None:
                await database_sync_to_async(_record)(owner_id, model.slug, stream.result)
    return None if stopped.is_set() else text


def _within_budget(owner_id: int) -> bool:
    owner = get_user_model().objects.filter(pk=owner_id).first()
    if owner is None:
        return False
    try:
        budgets.check_budget(owner)
    except BudgetExhausted:
        return False
    return True


def _record(owner_id: int, model_slug: str, result: StreamResult) -> None:
    budgets.record_usage(
        user_id=owner_id,
        model_slug=model_slug,
        prompt_tokens=token_count(result.prompt_tokens),
        completion_tokens=token_count(result.completion_tokens),
        title=True,
    )


async def _stop_when(stopped: asyncio.Event, stop: Callable[[], Awaitable[object]]) -> None:
    await stopped.wait()
    await stop()


@asynccontextmanager
async def _deletion(conversation_id: uuid.UUID, group: str) -> AsyncIterator[asyncio.Event]:
    """An event set when the conversation is deleted, while the block runs.

    The conversation's generation group gets a Stop for "whichever reply runs" (message_id None)
    only from a deletion; a Stop for one reply names it. Without a channel layer (Redis away)
    there is no watch: the request is only 16 tokens, and its title then matches no row.
    """
    deleted = asyncio.Event()
    layer = broadcast.layer()
    name = broadcast.generation_group(group)
    try:
        channel = await layer.new_channel()
        await layer.group_add(name, channel)
    except Exception:
        logger.warning("titles cannot watch for deletion: the channel layer is unavailable")
        yield deleted
        return

    async def watch() -> None:
        # Deleted before we joined: the Stop has gone already; the row tells.
        if not await database_sync_to_async(_exists)(conversation_id):
            deleted.set()
            return
        while True:
            try:
                event = protocol.parse(await layer.receive(channel))
            except (KeyError, TypeError):  # not ours (another version of chatsite, mid-deploy)
                continue
            if isinstance(event, Cancel) and event.message_id is None:
                deleted.set()
                return

    watcher = asyncio.create_task(watch())
    try:
        yield deleted
    finally:
        watcher.cancel()
        with suppress(Exception, asyncio.CancelledError):
            await watcher
        with suppress(Exception):
            await layer.group_discard(name, channel)


def _exists(conversation_id: uuid.UUID) -> bool:
    return Conversation.objects.filter(pk=conversation_id).exists()


def clean(text: str) -> str:
    """The model's answer as a title: the visible text of its first line (no Markdown), without
    quotes, a "Title:" label or closing punctuation, at most MAX_TITLE_CHARS cut at a word, and
    storable (see make_storable)."""
    line = next((line for line in make_storable(text).splitlines() if line.strip()), "")
    line = re.sub(r"^\s*(title\s*:)\s*", "", plain_text(line), flags=re.IGNORECASE)
    line = line.strip(QUOTES).rstrip(".!:;,")
    return cut_at_word(line, limit=MAX_TITLE_CHARS)


def _save(conversation_id: uuid.UUID, title: str) -> bool:
    # Conditional: a title its owner gave is never overwritten, whichever came first.
    return bool(
        Conversation.objects.filter(pk=conversation_id, title_is_custom=False).update(title=title)
    )

"""The engine's part of a generation: wait for the model, build the prompt, read the stream."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.utils.translation import gettext_noop

from conversations import engines
from conversations.engines import get_engine
from conversations.engines.base import EngineError, EngineStream, FinishReason, StreamResult
from conversations.events.protocol import Event
from conversations.generation.background import spawn
from conversations.generation.endings import Ending
from conversations.generation.feed import Feed
from conversations.generation.plans import ReplyPlan
from conversations.generation.stopping import Stopping
from conversations.models import Message
from conversations.ops import metrics
from conversations.services.text import StorableDeltas

logger = logging.getLogger("chatsite.generation")

Status = Message.Status


class Stalled(Exception):
    pass


class EngineRun:
    """One reply's request to its engine, from the Started event to the stream's last delta,
    which go to `feed`; a Stop (see Stopping) ends it early, and so does CHAT_MAX_REPLY_CHARS
    (the reply is then complete, finish reason "length", as at max_tokens)."""

    def __init__(
        self,
        plan: ReplyPlan,
        *,
        feed: Feed,
        stopping: Stopping,
        observer: metrics.GenerationObserver,
        send: Callable[[Event], Awaitable[None]],
    ) -> None:
        self.stream: EngineStream | None = None
        self.ready_at: datetime | None = None  # when the engine's model was loaded
        self._plan = plan
        self._feed = feed
        self._stopping = stopping
        self._observer = observer
        self._send = send
        self._background: set[asyncio.Task[Any]] = set()  # strong references, as for any task
        self._told_length = False  # the engine was told to stop at CHAT_MAX_REPLY_CHARS
        self._storable = StorableDeltas()

    @property
    def result(self) -> StreamResult | None:
        return self.stream.result if self.stream is not None else None

    async def run(self) -> Ending:
        plan = self._plan
        try:
            await self._send(plan.started)
            engine = get_engine(plan.model)
            # On a thread of its own: the event loop, the tabs' pings and this reply's Stop go on
            # meanwhile; a Stop that comes first leaves the load going on, for the next reply.
            if not await self._stopping.unless_stopped(engines.loaded(plan.model)):
                return Ending(Status.CANCELLED)  # stopped while the model was loading
            self.ready_at = datetime.now(UTC)
            # Off the event loop: counting tokens blocks (a tokenizer, or the model's server).
            prompt = await asyncio.to_thread(plan.prompt, engine)
            self.stream = engine.stream(
                prompt.messages,
                plan.sampling(),
                request_id=plan.request_id,
                prompt_tokens=prompt.tokens,
            )
            if self._stopping.wanted:
                await self.stream.stop()  # stopped while we were setting up
            await read_deltas(self.stream, self._on_delta, stopping=self._ends_early)
            await self._show(self._storable.rest())
        except (EngineError, Stalled) as exc:
            await self._show(self._storable.rest())  # the text shown so far is kept, whole
            detail = exc.detail if isinstance(exc, EngineError) else str(exc)
            logger.warning("engine error request_id=%s: %s", plan.request_id, detail)
            return Ending(Status.ERROR, str(exc) or exc.__class__.__name__, detail)
        except Exception as exc:
            logger.exception("generation crashed request_id=%s", plan.request_id)
            # Stored in English, translated where a page shows it (_message.html).
            failed = gettext_noop("The engine failed unexpectedly.")
            return Ending(Status.ERROR, failed, repr(exc))
        return self._ending(self.stream.result)

    def _ends_early(self) -> bool:
        return self._stopping.wanted or self._feed.text.full

    def _ending(self, result: StreamResult) -> Ending:
        """How a stream that ran to its end ended: complete, or cancelled by a Stop."""
        text = self._feed.text
        natural = result.finish_reason is not None and result.finish_reason.is_natural
        if text.full:
            # Cut at CHAT_MAX_REPLY_CHARS, or stopped there: whole at that length, as at
            # max_tokens. A model that ended right there by itself keeps its own reason.
            if text.dropped or not natural:
                result.finish_reason = FinishReason.LENGTH
            return Ending(Status.COMPLETE)
        # A Stop that arrived as the engine produced its last token stopped nothing, unless it
        # cut text the tabs were never sent: then the reply ends where they saw it end.
        if self._stopping.wanted and (text.dropped or not natural):
            if natural:
                result.finish_reason = FinishReason.ABORT  # it did not end by itself, as seen
            return Ending(Status.CANCELLED)
        return Ending(Status.COMPLETE)

    def stop_soon(self) -> None:
        """Tell the engine to stop, in a task of its own: the stop is confirmed at the finish,
        and the group's listener goes on meanwhile."""
        if self.stream is not None:
            spawn(self.stream.stop(), keep=self._background)

    async def _on_delta(self, delta: str) -> None:
        self._observer.token()
        # What the tabs are sent is what the row can keep: the channel layer cannot carry a lone
        # surrogate either.
        await self._show(self._storable.feed(delta))

    async def _show(self, text: str) -> None:
        if not text:
            return
        await self._feed.add(text)
        if self._feed.text.full and not self._told_length:
            # Told as a Stop tells it; the text past the limit is not kept (see Coalescer).
            self._told_length = True
            logger.info("reply reached CHAT_MAX_REPLY_CHARS request_id=%s", self._plan.request_id)
            self.stop_soon()


async def read_deltas(
    stream: EngineStream,
    on_delta: Callable[[str], Awaitable[None]],
    *,
    stopping: Callable[[], bool],
) -> None:
    """Hand every delta on; a stream that produces nothing for the stall timeout fails.

    The stream is read in a task of its own, one per reply (not one per token: at a hundred
    streams, a task and a timeout per token were a tenth of the process's time), while this one
    looks at it every poll: a stall never cancels the stream itself, and the stall clock runs
    only while the stream is not queued behind other replies: a queued reply is waiting, not
    stalled.
    """
    stall = settings.CHAT_STALL_TIMEOUT_S
    poll = min(stall / 4, 1.0)  # how often the reader and the queue are looked at
    progress_at = time.monotonic()

    async def read_all() -> None:
        nonlocal progress_at
        async with aclosing(aiter(stream)) as deltas:
            async for delta in deltas:
                if delta:
                    await on_delta(delta)
                progress_at = time.monotonic()

    reader = asyncio.create_task(read_all(), name="engine-reader")
    try:
        while True:
            done, _ = await asyncio.wait({reader}, timeout=poll)
            if done:
                reader.result()  # the stream's error, if it failed
                return
            now = time.monotonic()
            if stream.waiting_in_queue:
                progress_at = now
            elif now - progress_at >= stall:
                await stream.stop()  # bounded: a hung engine cannot hold us here
                if stopping():
                    return  # it was being stopped anyway: cancelled, not stalled
                raise Stalled(f"The engine produced nothing for {stall:g} seconds.")
    finally:
        if not reader.done():
            reader.cancel()
            await asyncio.wait({reader})
        if not reader.cancelled():
            reader.exception()  # seen: asyncio would log it as never retrieved

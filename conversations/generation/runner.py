"""One reply being generated: read the engine's stream, send it to the tabs, save how it ended.

A generation is an asyncio task in the process whose socket received the send. What it hears
from the conversation's group (Stop, a tab asking for the text so far, a tab still watching) and
its periodic work (flush, heartbeat, grace period) live in `control`; what it writes to its row,
in `rows`; what it has sent, in its `Coalescer`.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from contextlib import aclosing
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.db import DatabaseError

from conversations import engines
from conversations.engines import get_engine
from conversations.engines.base import (
    ChatMessage,
    EngineError,
    EngineStream,
    SamplingParams,
)
from conversations.engines.specs import ModelSpec, ReplySettings
from conversations.events import broadcast
from conversations.events.protocol import Event, Finished, MessagePayload, Started
from conversations.generation import rows, titles
from conversations.generation.control import Control
from conversations.generation.feed import Feed
from conversations.generation.listeners import Listeners
from conversations.generation.recovery import INTERRUPTED_ERROR
from conversations.models import Message
from conversations.ops import metrics
from conversations.services import prompt

logger = logging.getLogger("chatsite.generation")

Status = Message.Status

FINAL_SAVE_FIRST_PAUSE_S = 0.5
FINAL_SAVE_MAX_PAUSE_S = 10.0

# Strong references to running generations: asyncio keeps only weak ones to tasks.
_running: dict[int, Generation] = {}


def running_here(message_id: int | None) -> Generation | None:
    """The generation writing this reply, if it runs in this process."""
    return _running.get(message_id) if message_id is not None else None


@dataclass(frozen=True)
class ReplyPlan:
    """What a send decided, committed to the database before anything streams."""

    conversation_id: uuid.UUID
    group: str
    message_id: int
    request_id: str
    model: ModelSpec
    settings: ReplySettings  # the conversation's system prompt and sampling, within the model's
    started: Started
    history: list[ChatMessage]  # the conversation before this reply, for its prompt
    prefix: str = ""  # a continued reply: the text it goes on from (already shown)
    # What an API call asks of the engine beyond the conversation's settings (the gateway).
    top_p: float | None = None
    stop: tuple[str, ...] = ()
    seed: int | None = None
    # False: no title request after a first reply (an API call's conversation keeps the first
    # words of its first message, rather than cost the engine a second request per call).
    title_by_model: bool = True


class Stalled(Exception):
    pass


@dataclass(frozen=True)
class Ending:
    """How a generation ended: its status and, for a failure, what the user is told and what
    operators see (the admin, the log)."""

    status: Message.Status
    error: str = ""
    error_detail: str = ""


class Generation:
    def __init__(self, plan: ReplyPlan):
        self.plan = plan
        self.observer = metrics.GenerationObserver(plan.model.backend, plan.request_id)
        self.feed = Feed(plan.message_id, self.send, shown=plan.prefix)
        self.control = Control(self)
        self.stream: EngineStream | None = None
        self.engine_ready_at: datetime | None = None
        self.first_token_at: datetime | None = None
        self.stop: rows.RecordedStop | None = None  # the first Stop that reached us
        self.lost = False  # someone else settled our row: nothing we write will be kept
        self._stop_event = asyncio.Event()  # set with stop or lost
        self._background: set[asyncio.Task[Any]] = set()
        self.task: asyncio.Task[None] | None = None
        self._layer_down = False  # the last group send failed (Redis away)
        self.listeners = Listeners()  # readers in this process (the gateway's responses)

    @classmethod
    def start(cls, plan: ReplyPlan) -> Generation:
        generation = cls(plan)
        _running[plan.message_id] = generation
        # In a context of its own, not its starter's: a generation outlives the HTTP request
        # that may start it (the gateway), whose executors for sync code end with the request.
        generation.task = asyncio.create_task(
            generation.run(), name=f"generation-{plan.request_id}", context=contextvars.Context()
        )
        return generation

    def spawn(self, work: Coroutine[Any, Any, Any], name: str | None = None) -> asyncio.Task[Any]:
        task = asyncio.create_task(work, name=name)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def run(self) -> None:
        try:
            await self._run()
        finally:
            self.listeners.end()  # however it ended: a reader never waits for nothing

    async def _run(self) -> None:
        ending = Ending(Status.COMPLETE)
        await self.control.join()
        try:
            ending = await self._generate()
        except asyncio.CancelledError:
            # The process is shutting down under us: what was written is kept, marked unfinished.
            ending = Ending(Status.INTERRUPTED, INTERRUPTED_ERROR)
            raise
        finally:
            self.control.stop()
            try:
                await self._finish(ending)
            except Exception:
                logger.exception("could not save the reply request_id=%s", self.plan.request_id)
            else:
                self._title_after(ending)
            self.listeners.end()  # now, not after leaving the group: the reply is over
            await self.control.leave()
            _running.pop(self.plan.message_id, None)

    def _title_after(self, ending: Ending) -> None:
        """A first reply complete: its model titles the conversation, now that the reply has
        gone out whole (see titles)."""
        plan = self.plan
        if (
            ending.status == Status.COMPLETE
            and plan.title_by_model
            and titles.wanted(plan.history, plan.prefix)
        ):
            titles.start(
                conversation_id=plan.conversation_id,
                group=plan.group,
                model=plan.model,
                question=plan.history[0].content,
                reply=self.feed.text.text,
            )

    async def _generate(self) -> Ending:
        plan = self.plan
        try:
            await self.send(plan.started)
            engine = get_engine(plan.model)
            if not await self._engine_loaded():
                return Ending(Status.CANCELLED)  # stopped while the model was loading
            self.engine_ready_at = datetime.now(UTC)
            # Off the event loop: counting tokens may load the model's tokenizer.
            messages = await asyncio.to_thread(
                prompt.fit_to_context, plan.history, engine, plan.settings
            )
            params = SamplingParams(
                max_tokens=plan.settings.max_tokens,
                temperature=plan.settings.temperature,
                continue_final=bool(plan.prefix),
                top_p=plan.top_p,
                stop=plan.stop,
                seed=plan.seed,
            )
            if plan.prefix:  # the model goes on writing the reply it was cut off in
                messages = [*messages, ChatMessage("assistant", plan.prefix)]
            self.stream = engine.stream(messages, params, request_id=plan.request_id)
            if self.stop_wanted:
                await self.stream.stop()  # stopped while we were setting up
            await read_deltas(self.stream, self._on_delta, stopping=lambda: self.stop_wanted)
        except (EngineError, Stalled) as exc:
            detail = exc.detail if isinstance(exc, EngineError) else str(exc)
            logger.warning("engine error request_id=%s: %s", plan.request_id, detail)
            return Ending(Status.ERROR, str(exc) or exc.__class__.__name__, detail)
        except Exception as exc:
            logger.exception("generation crashed request_id=%s", plan.request_id)
            return Ending(Status.ERROR, "The engine failed unexpectedly.", repr(exc))
        finish_reason = self.stream.result.finish_reason
        # A Stop that arrived as the engine produced its last token stopped nothing.
        if self.stop_wanted and not (finish_reason and finish_reason.is_natural):
            return Ending(Status.CANCELLED)
        return Ending(Status.COMPLETE)

    async def _engine_loaded(self) -> bool:
        """Wait for the engine's model to load (on a thread of its own: the event loop, the
        tabs' pings and this reply's Stop go on meanwhile); False if a Stop came first."""
        loading = asyncio.ensure_future(engines.loaded(self.plan.model))
        stopped = asyncio.ensure_future(self._stop_event.wait())
        try:
            await asyncio.wait({loading, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
            if not loading.done():
                loading.cancel()  # the load goes on in its thread, for the next reply
        if self.stop_wanted:
            return False
        loading.result()  # a load that failed raises here: the reply ends with its error
        return True

    @property
    def stop_wanted(self) -> bool:
        return self.stop is not None or self.lost

    async def _on_delta(self, delta: str) -> None:
        self.observer.token()
        if self.first_token_at is None:
            # The row says "streaming" from the next keep-alive round: one write for all replies.
            self.first_token_at = datetime.now(UTC)
        await self.feed.add(delta)

    def snapshot_to(self, reply_channel: str) -> None:
        """Send one tab the text so far, in a task of its own: a full channel makes it wait, and
        nothing else (Stops above all) may wait behind it."""
        self.spawn(self.feed.snapshot_to(reply_channel))

    async def request_stop(self, stop: rows.RecordedStop) -> None:
        """A Stop reached us (from the group, the row, or the grace period); the first one counts."""
        if self.stop is not None:
            return
        self.stop = stop
        self._stop_event.set()
        logger.info("cancel received request_id=%s, stopping the engine", self.plan.request_id)
        if self.stream is not None:
            self.spawn(self.stream.stop())  # confirmed in _finish; the listener goes on meanwhile

    def row_lost(self) -> None:
        """Our row was settled by someone else: stop the engine, since nothing it writes is kept."""
        if self.lost:
            return
        self.lost = True
        self._stop_event.set()
        logger.warning("reply row settled elsewhere request_id=%s", self.plan.request_id)
        if self.stream is not None:
            self.spawn(self.stream.stop())

    async def _finish(self, ending: Ending) -> None:
        status = ending.status
        await self.feed.send_now()  # the saved text is exactly the text every tab was sent
        stream = self.stream
        confirmed_at = None
        if status == Status.CANCELLED and stream is not None:
            confirmed_at = await stream.stop()
        result = stream.result if stream is not None else None
        self.observer.finished(
            status,
            tokens=result.completion_tokens if result is not None else 0,
            cancel_requested_at=self.stop.requested_at.timestamp() if self.stop else None,
            cancel_confirmed_at=confirmed_at,
        )
        outcome = rows.Outcome(
            status=status,
            text=self.feed.text.text,
            error=ending.error,
            error_detail=ending.error_detail,
            engine_ready_at=self.engine_ready_at,
            first_token_at=self.first_token_at,
            result=result,
            stop=self.stop if status == Status.CANCELLED else None,
            stop_confirmed_at=confirmed_at,
        )
        saved = await self._save(outcome)
        logger.info(
            "generation finished request_id=%s status=%s chars=%s",
            self.plan.request_id,
            saved["status"] if saved else "deleted",
            self.feed.text.length,
        )
        if saved is not None:
            await self.send(Finished(self.plan.message_id, saved))

    async def _save(self, outcome: rows.Outcome) -> MessagePayload | None:
        """The final save, retried with backoff while the database is away: the saved text must
        be the text the tabs saw. Gives up (logged) after CHAT_FINAL_SAVE_RETRY_S."""
        deadline = time.monotonic() + settings.CHAT_FINAL_SAVE_RETRY_S
        pause, retrying = FINAL_SAVE_FIRST_PAUSE_S, False
        while True:
            try:
                saved: MessagePayload | None = await database_sync_to_async(rows.finish)(
                    self.plan.conversation_id, self.plan.message_id, outcome, retrying=retrying
                )
                return saved
            except DatabaseError as exc:
                if time.monotonic() + pause > deadline:
                    raise
                if not retrying:
                    logger.warning(
                        "final save failed request_id=%s, retrying: %r", self.plan.request_id, exc
                    )
                retrying = True
                await asyncio.sleep(pause)
                pause = min(pause * 2, FINAL_SAVE_MAX_PAUSE_S)

    async def send(self, event: Event) -> None:
        self.listeners.deliver(event)  # in this process: first, and never dropped
        # A channel-layer outage must not lose the reply: the row is still written, and tabs
        # that reconnect resynchronize from it and from us. One warning per outage, not per frame.
        try:
            await broadcast.to_group(self.plan.group, event)
        except Exception as exc:
            if not self._layer_down:
                logger.warning("group send failed request_id=%s: %r", self.plan.request_id, exc)
            self._layer_down = True
        else:
            if self._layer_down:
                logger.info("group sends work again request_id=%s", self.plan.request_id)
            self._layer_down = False


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

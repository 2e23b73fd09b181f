"""One reply being generated: read the engine's stream, send it to the tabs, save how it ended.

A generation is an asyncio task in the process whose socket received the send, made of parts
that each do one job: the engine's request and stream (`streaming`), the text on its way to
the tabs (`feed`), whether it must stop (`stopping`), where its events go (`outbox`), what it
hears from the conversation's group and its periodic work (flush, heartbeat, grace period:
`control`), what it writes to its row (`rows`, the final save in `endings`).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging

from conversations.events.protocol import Finished
from conversations.generation import rows, temporary, titles
from conversations.generation.control import Control
from conversations.generation.endings import Ending, save_final
from conversations.generation.feed import Feed
from conversations.generation.listeners import Listener
from conversations.generation.outbox import Outbox
from conversations.generation.plans import ReplyPlan
from conversations.generation.recovery import INTERRUPTED_ERROR
from conversations.generation.running import RunningReply
from conversations.generation.stopping import Stopping
from conversations.generation.streaming import EngineRun
from conversations.models import Message
from conversations.ops import metrics

logger = logging.getLogger("chatsite.generation")

Status = Message.Status

# Strong references to running generations: asyncio keeps only weak ones to tasks.
_running: dict[int, Generation] = {}


def running_here(message_id: int | None) -> RunningReply | None:
    """The generation writing this reply, if it runs in this process."""
    return _running.get(message_id) if message_id is not None else None


def running_all() -> list[Generation]:
    """Every generation running in this process (see shutdown)."""
    return list(_running.values())


class Generation:
    """One reply being generated in this process, from its plan to its final save. Callers
    reach it as a RunningReply (see running); its Control sees only its parts."""

    def __init__(self, plan: ReplyPlan):
        self.plan = plan
        self._observer = metrics.GenerationObserver(plan.model.backend, plan.request_id)
        self._outbox = Outbox(plan.group, plan.request_id)
        self._feed = Feed(plan.message_id, self._outbox.send, shown=plan.prefix)
        self._stopping = Stopping(plan.request_id, stop_engine=self._stop_engine)
        self._engine = EngineRun(
            plan,
            feed=self._feed,
            stopping=self._stopping,
            observer=self._observer,
            send=self._outbox.send,
        )
        self._control = Control(plan, feed=self._feed, stopping=self._stopping, outbox=self._outbox)
        self._task: asyncio.Task[None] | None = None
        self._finishing = False  # its end is decided and being saved

    @classmethod
    def start(cls, plan: ReplyPlan) -> Generation:
        titles.reply_starting(plan.model)  # a title being written on its engine gives way
        generation = cls(plan)
        _running[plan.message_id] = generation
        # In a context of its own, not its starter's: a generation outlives the HTTP request
        # that may start it (the gateway), whose executors for sync code end with the request.
        generation._task = asyncio.create_task(
            generation.run(), name=f"generation-{plan.request_id}", context=contextvars.Context()
        )
        return generation

    # As a RunningReply.

    def listen(self) -> Listener:
        return self._outbox.listeners.add()

    def stop_listening(self, listener: Listener) -> None:
        self._outbox.listeners.discard(listener)
        # What it never took from its queue it never received: a stop keeps no more than that.
        unread = []
        while not listener.empty():
            unread.append(listener.get_nowait())
        self._feed.reader_left(unread)

    async def request_stop(self, stop: rows.RecordedStop) -> None:
        self._stopping.request(stop)

    def snapshot_to(self, reply_channel: str) -> None:
        self._feed.send_snapshot(reply_channel)

    async def finished(self) -> None:
        if self._task is not None:
            await asyncio.wait({self._task})

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The event loop it runs on."""
        return self._task.get_loop() if self._task is not None else None

    def interrupt(self) -> None:
        """The process is shutting down: end now, saving the text as interrupted (see _run)."""
        # Not once it is saving: that save is the one being waited for.
        if self._task is not None and not self._finishing:
            self._task.cancel()

    # Its life.

    async def run(self) -> None:
        try:
            await self._run()
        finally:
            self._outbox.listeners.end()  # however it ended: a reader never waits for nothing

    async def _run(self) -> None:
        ending = Ending(Status.COMPLETE)
        await self._control.join()
        try:
            ending = await self._engine.run()
        except asyncio.CancelledError:
            # The process is shutting down under us: what was written is kept, marked unfinished.
            ending = Ending(Status.INTERRUPTED, INTERRUPTED_ERROR)
            raise
        finally:
            self._finishing = True
            self._control.stop()
            try:
                await self._finish(ending)
            except Exception:
                logger.exception("could not save the reply request_id=%s", self.plan.request_id)
            else:
                # A first reply complete: its model titles the conversation, now that the reply
                # has gone out whole (see titles).
                if ending.status == Status.COMPLETE and titles.wanted(self.plan):
                    titles.start(self.plan, reply=self._feed.text.text)
            self._outbox.listeners.end()  # now, not after leaving the group: the reply is over
            await self._control.leave()
            _running.pop(self.plan.message_id, None)
            if self.plan.temporary:  # the reply that kept it has ended: gone if no tab is left
                temporary.sweep_later(self.plan.conversation_id)

    def _stop_engine(self) -> None:
        self._feed.stop()  # nothing more goes out: the text the tabs were sent is the reply
        self._engine.stop_soon()

    async def _finish(self, ending: Ending) -> None:
        status = ending.status
        await self._feed.finish()  # the saved text is exactly the text every tab was sent
        stream, stop = self._engine.stream, self._stopping.stop
        confirmed_at = None
        if status == Status.CANCELLED and stream is not None:
            confirmed_at = await stream.stop()
        result = self._engine.result
        self._observer.finished(
            status,
            tokens=result.completion_tokens if result is not None else 0,
            cancel_requested_at=stop.requested_at.timestamp() if stop else None,
            cancel_confirmed_at=confirmed_at,
        )
        outcome = rows.Outcome(
            status=status,
            text=self._feed.text.text,
            error=ending.error,
            error_detail=ending.error_detail,
            engine_ready_at=self._engine.ready_at,
            first_token_at=self._feed.first_token_at,
            result=result,
            stop=stop if status == Status.CANCELLED else None,
            stop_confirmed_at=confirmed_at,
        )
        saved = await save_final(self.plan, outcome)
        logger.info(
            "generation finished request_id=%s status=%s chars=%s",
            self.plan.request_id,
            saved["status"] if saved else "deleted",
            self._feed.text.length,
        )
        if saved is not None:
            await self._outbox.send(Finished(self.plan.message_id, saved))

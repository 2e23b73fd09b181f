"""An API call's reply as the HTTP response reads it.

A reply is an ordinary generation in this process: tabs on the conversation see it stream
and can stop it. The response reads it from the generation directly (RunningReply.listen:
nothing lost, nothing through the channel layer), and a response that ends before the reply (the client
closed the stream or went away) stops the engine, recorded as cancelled by `client_disconnect`.

A call that is not recorded (CHAT_GATEWAY_RECORD=0, a token that records none, a call marked as
the client's housekeeping: the view decides) keeps no transcript: it always starts a conversation,
which lives only while its reply is written (the lifecycle needs its rows: Stop, heartbeat,
recovery, the per-user limits) and is deleted once the generation has ended; the metrics
(Prometheus, the log) stay. It leaves no conversation, so it does not count against the
conversations a minute. A process killed mid-call leaves that conversation behind, marked
interrupted like any other reply's.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
import uuid
from collections.abc import Coroutine
from typing import Any

from channels.db import database_sync_to_async

from conversations.events.payloads import MessagePayload
from conversations.events.protocol import Delta, Event, Finished
from conversations.gateway import continuation
from conversations.generation import rows
from conversations.generation.background import spawn
from conversations.generation.plans import ReplyPlan
from conversations.generation.running import RunningReply
from conversations.models import Conversation
from conversations.services.conversations import conversation_delete

logger = logging.getLogger("chatsite.gateway")

CLIENT_DISCONNECT = "client_disconnect"  # cancelled_by when the client left mid-reply


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
                if self._record:
                    # Before the response ends: the client's next turn may come at once.
                    await _remember_reply(self.plan.message_id)
        return None

    async def release(self) -> None:
        """The response is done with the reply. If the reply is still being written, its client
        went away (closed the stream, disconnected): stop the engine now, for nobody reads on.
        Without recording, the conversation is deleted once the generation has ended."""
        if self._released:
            return
        self._released = True
        self.running.stop_listening(self._events)
        left = not self.over
        if left:
            logger.info("client went away request_id=%s, stopping", self.plan.request_id)
            stop = rows.RecordedStop(rows.unix_time(time.time()), CLIENT_DISCONNECT)
            await self.running.request_stop(stop)  # as a Stop from a tab in this process
        if not self._record:
            _in_background(_forget(self.running))
        elif left:  # its reply is keyed once saved, as the client read it
            _in_background(_remember_when_over(self.running))


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


async def _remember_when_over(running: RunningReply) -> None:
    await running.finished()
    await _remember_reply(running.plan.message_id)


async def _remember_reply(message_id: int) -> None:
    try:
        await database_sync_to_async(continuation.remember)(message_id)
    except Exception:  # the reply stands; only a later call's continuing it is lost
        logger.exception("could not key a call's reply by its path")


def _delete_conversation(conversation_id: uuid.UUID) -> None:
    conversation = Conversation.objects.filter(pk=conversation_id).first()
    if conversation is not None:
        conversation_delete(conversation=conversation)

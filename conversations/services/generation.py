"""The generation lifecycle: start, stream, flush, cancel, finish.

A running generation is an asyncio task in the process whose socket received the send. It joins
the conversation's channel-layer group with a channel of its own, so any consumer in any process
reaches it by sending to that group:

- ``generation.cancel``: stop the engine, wait for it to confirm, save the partial text.
- ``generation.sync``: send the text so far to one consumer (a tab that connected mid-reply).
- ``generation.pong``: a tab is still watching (answer to our ``chat.ping``).

Towards the tabs it sends ``chat.started``, ``chat.delta`` (text with its character offset),
``chat.finished`` and ``chat.ping``; the consumers render those for the browser or as JSON.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import aclosing, asynccontextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from channels.db import database_sync_to_async
from channels.exceptions import ChannelFull
from channels.layers import BaseChannelLayer, get_channel_layer
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone

from conversations import metrics
from conversations.engines import get_engine
from conversations.engines.base import ChatMessage, EngineError, EngineStream, SamplingParams
from conversations.events import started_event_data
from conversations.models import Conversation, Message
from conversations.services.errors import (
    ConversationGone,
    DuplicateSend,
    NothingToCancel,
    ReplyInProgress,
)
from conversations.services.limits import check_send_allowed
from conversations.services.prompt import build_chat_messages
from conversations.services.recovery import INTERRUPTED_ERROR, replies_mark_interrupted

logger = logging.getLogger("chatsite.generation")

SNAPSHOT_ATTEMPTS = 20
# An engine that has not confirmed a stop by then is logged, and the reply is saved anyway.
ENGINE_STOP_TIMEOUT_S = 10.0

# Strong references to running generations: asyncio keeps only weak ones to tasks.
_running: dict[int, Generation] = {}


@dataclass(frozen=True)
class ReplyPlan:
    """What a send decided, committed to the database before anything streams."""

    conversation_id: Any
    group: str
    user_message_id: int
    message_id: int
    request_id: str
    engine_name: str
    chat_messages: list[ChatMessage]
    started: dict[str, Any]  # the chat.started event's data


def reply_create(
    *, conversation: Conversation, content: str, idempotency_key: str = ""
) -> ReplyPlan:
    """Save the user's message and a pending reply, or refuse the send.

    Refusals hold across processes: the database's unique constraints allow one active reply per
    conversation and one message per idempotency key, and the owner's row is locked while the
    per-user limits are counted, so concurrent sends of one user are counted one after another.
    """
    engine = get_engine()
    # A reply whose process died would otherwise block this conversation until the next restart.
    replies_mark_interrupted(conversation=conversation)
    with transaction.atomic():
        owner = get_user_model().objects.select_for_update().get(pk=conversation.owner_id)
        if not Conversation.objects.filter(pk=conversation.pk).exists():
            raise ConversationGone("This conversation has been deleted.")
        check_send_allowed(owner, conversation=conversation, idempotency_key=idempotency_key)
        try:
            with transaction.atomic():
                user_message = Message.objects.create(
                    conversation=conversation,
                    role=Message.Role.USER,
                    content=content,
                    idempotency_key=idempotency_key,
                )
        except IntegrityError:
            raise DuplicateSend("This message was already sent.") from None
        try:
            with transaction.atomic():
                reply = Message.objects.create(
                    conversation=conversation,
                    role=Message.Role.ASSISTANT,
                    status=Message.Status.PENDING,
                    engine=engine.name,
                    model=engine.model,
                    request_id=uuid.uuid4().hex,
                    heartbeat_at=timezone.now(),
                )
        except IntegrityError:
            raise ReplyInProgress(
                "A reply is still being written. Wait for it or press Stop, then send again."
            ) from None
        # Conditional: this socket's copy of the conversation may predate a rename in another tab.
        Conversation.objects.filter(pk=conversation.pk, title="", title_is_custom=False).update(
            title=" ".join(content.split())[:80]
        )
        Conversation.objects.filter(pk=conversation.pk).update(updated_at=timezone.now())
        chat_messages = build_chat_messages(conversation, engine)
        reply.conversation = Conversation.objects.get(pk=conversation.pk)  # with its new title
    return ReplyPlan(
        conversation_id=conversation.id,
        group=conversation.group_name,
        user_message_id=user_message.pk,
        message_id=reply.pk,
        request_id=reply.request_id,
        engine_name=engine.name,
        chat_messages=chat_messages,
        started=started_event_data(user_message, reply),
    )


async def reply_start(
    *, conversation: Conversation, content: str, idempotency_key: str = ""
) -> Generation:
    """Save a send and start streaming its reply in this process."""
    plan = await database_sync_to_async(reply_create)(
        conversation=conversation, content=content, idempotency_key=idempotency_key
    )
    logger.info("send accepted request_id=%s message=%s", plan.request_id, plan.message_id)
    generation = Generation(plan)
    generation.start()
    return generation


async def reply_cancel(*, conversation: Conversation, cancelled_by: str) -> None:
    """Ask the conversation's running generation, wherever it runs, to stop.

    The request goes to the conversation's group, which reaches the generation at once, and into
    the reply's row, which the generation reads at every flush: a group message can be lost (a
    full channel, a Redis restart, a generation that has not joined its group yet), the row not.
    """
    requested_at = timezone.now()
    active = await database_sync_to_async(_record_cancel_request)(
        conversation, cancelled_by, requested_at
    )
    logger.info("cancel requested request_id=%s by=%s", active.request_id, cancelled_by)
    await get_channel_layer().group_send(
        conversation.group_name,
        {
            "type": "generation.cancel",
            "message_id": active.pk,
            "requested_at": requested_at.timestamp(),
            "cancelled_by": cancelled_by,
        },
    )


def _record_cancel_request(
    conversation: Conversation, cancelled_by: str, requested_at: datetime
) -> Message:
    active = Message.objects.filter(conversation=conversation).active().first()
    if active is None:
        raise NothingToCancel("Nothing is being written right now.")
    # Conditional: the first Stop's time and author stand, and a finished reply is not touched.
    Message.objects.filter(pk=active.pk, cancel_requested_at__isnull=True).active().update(
        cancel_requested_at=requested_at, cancelled_by=cancelled_by
    )
    return active


class Generation:
    """One reply being generated: streams engine deltas to the group and keeps the row current."""

    def __init__(self, plan: ReplyPlan):
        self.plan = plan
        self.observer = metrics.GenerationObserver(plan.engine_name, plan.request_id)
        self.layer: BaseChannelLayer = get_channel_layer()
        self.channel = ""
        self.parts: list[str] = []
        self.unsent: list[str] = []  # deltas received since the last frame
        self.length = 0  # characters received from the engine
        self.sent = 0  # characters sent to the tabs; always <= length
        self.flushed = 0  # characters written to the database
        self.first_token_at: datetime | None = None
        self.cancel_requested_at: float | None = None
        self.cancelled_by = ""
        self.last_viewer_seen = time.monotonic()
        self.stream: EngineStream | None = None
        self.task: asyncio.Task[None] | None = None
        self._send_lock = asyncio.Lock()
        self._snapshot_tasks: set[asyncio.Task[None]] = set()
        self._mark_streaming_task: asyncio.Task[None] | None = None
        self._frame_task: asyncio.Task[None] | None = None
        self._last_frame_at = float("-inf")
        self._coalesce_s = settings.CHAT_COALESCE_MS / 1000

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def start(self) -> None:
        _running[self.plan.message_id] = self
        self.task = asyncio.create_task(self.run(), name=f"generation-{self.plan.request_id}")

    async def run(self) -> None:
        plan = self.plan
        self.channel = await self.layer.new_channel()
        async with _logged_failure("group add", plan.request_id):
            await self.layer.group_add(plan.group, self.channel)
        listener = asyncio.create_task(self._listen())
        keeper = asyncio.create_task(self._keep_alive())
        status, error = Message.Status.COMPLETE, ""
        try:
            await self._group_send("chat.started", **plan.started)
            engine = get_engine(plan.engine_name)
            params = SamplingParams(
                max_tokens=settings.CHAT_MAX_TOKENS, temperature=settings.CHAT_TEMPERATURE
            )
            self.stream = engine.stream(plan.chat_messages, params, request_id=plan.request_id)
            if self.cancel_requested_at is not None:
                await self.stream.stop()  # cancelled while we were setting up
            await self._consume(self.stream)
            # A Stop that arrived as the engine produced its last token stopped nothing.
            if self.cancel_requested_at is not None and self.stream.result.finish_reason not in (
                "stop",
                "length",
            ):
                status = Message.Status.CANCELLED
        except (EngineError, TimeoutError) as exc:
            status, error = Message.Status.ERROR, _readable_error(exc)
            logger.warning("engine error request_id=%s: %s", plan.request_id, error)
        except asyncio.CancelledError:
            # The process is shutting down under us: what was written is kept, marked unfinished.
            status, error = Message.Status.INTERRUPTED, INTERRUPTED_ERROR
            raise
        except Exception as exc:
            status, error = Message.Status.ERROR, "The engine failed unexpectedly."
            logger.exception("generation crashed request_id=%s: %s", plan.request_id, exc)
        finally:
            listener.cancel()
            keeper.cancel()
            for task in self._snapshot_tasks:
                task.cancel()
            try:
                await self._finish(status, error)
            except Exception:
                logger.exception("could not save the reply request_id=%s", plan.request_id)
            with suppress(Exception):
                await self.layer.group_discard(plan.group, self.channel)
            _running.pop(plan.message_id, None)

    async def _consume(self, stream: EngineStream) -> None:
        stall = settings.CHAT_STALL_TIMEOUT_S
        async with aclosing(aiter(stream)) as deltas:  # type: ignore[type-var]
            while True:
                try:
                    async with asyncio.timeout(stall):
                        delta = await anext(deltas)
                except StopAsyncIteration:
                    return
                except TimeoutError:
                    if getattr(stream, "waiting_in_queue", False):
                        continue  # queued behind other replies (shown as waiting), not stalled
                    await stream.stop()
                    raise TimeoutError(
                        f"The engine produced nothing for {stall:g} seconds."
                    ) from None
                if delta:
                    await self._on_delta(delta)

    async def _on_delta(self, delta: str) -> None:
        self.observer.token()
        self.parts.append(delta)
        self.unsent.append(delta)
        self.length += len(delta)
        if self.first_token_at is None:
            self.first_token_at = datetime.now(UTC)
            await self._send_frame()  # the first token goes out at once
            # In the background: the second token must not wait for a database round trip.
            self._mark_streaming_task = asyncio.create_task(
                database_sync_to_async(self._mark_streaming)()
            )
            return
        if self._frame_task is None:
            delay = self._last_frame_at + self._coalesce_s - time.monotonic()
            if delay <= 0:
                await self._send_frame()
            else:
                self._frame_task = asyncio.create_task(self._send_frame_later(delay))

    async def _send_frame_later(self, delay: float) -> None:
        await asyncio.sleep(delay)
        self._frame_task = None
        await self._send_frame()

    async def _send_frame(self) -> None:
        async with self._send_lock:
            if not self.unsent:
                return
            offset, text = self.sent, "".join(self.unsent)
            self.unsent.clear()
            self.sent += len(text)
            self._last_frame_at = time.monotonic()
            await self._group_send("chat.delta", offset=offset, text=text)

    async def _listen(self) -> None:
        """Handle what tabs send to the group; ignore our own frames, which come back to us too."""
        while True:
            try:
                event = await self.layer.receive(self.channel)
            except Exception as exc:
                # Redis went away: keep generating and saving; listen again once it is back, and
                # join the group again, since a restarted Redis has forgotten its members.
                logger.warning(
                    "channel layer receive failed request_id=%s: %r", self.plan.request_id, exc
                )
                await asyncio.sleep(0.5)
                with suppress(Exception):
                    await self.layer.group_add(self.plan.group, self.channel)
                continue
            kind = event.get("type")
            if event.get("message_id") not in (None, self.plan.message_id):
                continue
            if kind == "generation.cancel":
                await self._cancel(event["requested_at"], event.get("cancelled_by", ""))
            elif kind == "generation.sync":
                # In a task of its own: a full channel makes it retry, and cancels must not wait.
                task = asyncio.create_task(self._send_snapshot(event["reply_channel"]))
                self._snapshot_tasks.add(task)
                task.add_done_callback(self._snapshot_tasks.discard)
            elif kind == "generation.pong":
                self.last_viewer_seen = time.monotonic()

    async def _cancel(self, requested_at: float, cancelled_by: str) -> None:
        if self.cancel_requested_at is not None:
            return
        self.cancel_requested_at = requested_at
        self.cancelled_by = cancelled_by
        logger.info("cancel received request_id=%s, stopping the engine", self.plan.request_id)
        if self.stream is not None:
            await self._stop_engine()

    async def _stop_engine(self) -> datetime | None:
        """Stop the engine and return when it confirmed; None if it failed to confirm."""
        assert self.stream is not None
        try:
            async with asyncio.timeout(ENGINE_STOP_TIMEOUT_S):
                return await self.stream.stop()
        except Exception:
            logger.exception("engine did not confirm the stop request_id=%s", self.plan.request_id)
            return None

    async def _send_snapshot(self, reply_channel: str) -> None:
        # Under the send lock, so every delta after the snapshot starts where it ends.
        async with self._send_lock, _logged_failure("snapshot send", self.plan.request_id):
            snapshot = {
                "type": "chat.snapshot",
                "message_id": self.plan.message_id,
                "offset": 0,
                "text": self.text[: self.sent],
            }
            # The tab asking is often the one whose channel overflowed: give it time to drain.
            for attempt in range(SNAPSHOT_ATTEMPTS):
                try:
                    await self.layer.send(reply_channel, snapshot)
                    return
                except ChannelFull:
                    if attempt == SNAPSHOT_ATTEMPTS - 1:
                        raise
                    await asyncio.sleep(0.05)

    async def _keep_alive(self) -> None:
        """Flush partial text and the heartbeat; stop the engine once nobody has watched for a while."""
        interval = settings.CHAT_FLUSH_INTERVAL_S
        grace = settings.CHAT_DISCONNECT_GRACE_S
        while True:
            await asyncio.sleep(interval)
            try:
                cancel_request = await database_sync_to_async(self._flush)()
            except Exception as exc:
                logger.warning("flush failed request_id=%s: %r", self.plan.request_id, exc)
            else:
                if cancel_request is not None:
                    await self._cancel(cancel_request[0].timestamp(), cancel_request[1])
            await self._group_send("chat.ping", reply_channel=self.channel)
            if time.monotonic() - self.last_viewer_seen > grace:
                logger.info("no viewer for %ss request_id=%s", grace, self.plan.request_id)
                await self._cancel(time.time(), "disconnect")

    def _mark_streaming(self) -> None:
        Message.objects.filter(pk=self.plan.message_id, status=Message.Status.PENDING).update(
            status=Message.Status.STREAMING, first_token_at=self.first_token_at
        )

    def _flush(self) -> tuple[datetime, str] | None:
        """Write the partial text and heartbeat; return a Stop recorded in the row, if any."""
        length = self.length
        fields: dict[str, Any] = {"heartbeat_at": timezone.now()}
        if length != self.flushed:
            fields["content"] = self.text[:length]
        # Only an active row is ours to write; a finished one must never be overwritten.
        row = Message.objects.filter(pk=self.plan.message_id).active()
        self.flushed = length
        if self.cancel_requested_at is not None:
            row.update(**fields)
            return None
        # Conditional on no recorded Stop: one query in the usual case, and a miss means "look".
        if row.filter(cancel_requested_at__isnull=True).update(**fields):
            return None
        row.update(**fields)
        recorded = row.values_list("cancel_requested_at", "cancelled_by").first()
        if recorded is None or recorded[0] is None:
            return None  # finished or deleted meanwhile
        return recorded[0], recorded[1]

    async def _finish(self, status: str, error: str) -> None:
        if self._frame_task is not None:
            self._frame_task.cancel()
            self._frame_task = None
        await self._send_frame()  # the saved text is exactly the text every tab was sent
        result = self.stream.result if self.stream is not None else None
        confirmed_at = None
        if status == Message.Status.CANCELLED and self.stream is not None:
            confirmed_at = await self._stop_engine()
        self.observer.finished(
            status,
            tokens=result.completion_tokens if result is not None else 0,
            cancel_requested_at=self.cancel_requested_at,
            cancel_confirmed_at=confirmed_at,
        )
        await database_sync_to_async(self._save_final)(status, error, result, confirmed_at)
        logger.info(
            "generation finished request_id=%s status=%s chars=%s",
            self.plan.request_id,
            status,
            self.length,
        )
        await self._group_send("chat.finished")

    def _save_final(
        self, status: str, error: str, result: Any, confirmed_at: datetime | None
    ) -> None:
        fields: dict[str, Any] = {
            "status": status,
            "content": self.text,
            "error": error,
            "finished_at": timezone.now(),
            "first_token_at": self.first_token_at,
            "heartbeat_at": None,
        }
        if result is not None:
            fields.update(
                prompt_tokens=result.prompt_tokens,
                completion_tokens=result.completion_tokens,
                finish_reason=result.finish_reason or ("abort" if confirmed_at else ""),
            )
        if status == Message.Status.CANCELLED:
            requested = datetime.fromtimestamp(self.cancel_requested_at or time.time(), UTC)
            confirmed = confirmed_at or timezone.now()
            fields.update(
                cancel_requested_at=requested,
                cancel_confirmed_at=confirmed,
                cancel_latency_ms=max(0.0, (confirmed - requested).total_seconds() * 1000),
                cancelled_by=self.cancelled_by,
            )
        # Conditional: if the row was already finalized (marked interrupted), that decision stands.
        Message.objects.filter(pk=self.plan.message_id).active().update(**fields)
        Conversation.objects.filter(pk=self.plan.conversation_id).update(updated_at=timezone.now())

    async def _group_send(self, kind: str, **fields: Any) -> None:
        # A channel-layer outage must not lose the reply: the row is still written, and tabs
        # that reconnect resynchronize from it and from us.
        async with _logged_failure("group send", self.plan.request_id):
            await self.layer.group_send(
                self.plan.group, {"type": kind, "message_id": self.plan.message_id, **fields}
            )


@asynccontextmanager
async def _logged_failure(what: str, request_id: str) -> AsyncIterator[None]:
    try:
        yield
    except Exception as exc:
        logger.warning("%s failed request_id=%s: %r", what, request_id, exc)


def _readable_error(exc: BaseException) -> str:
    return str(exc) or exc.__class__.__name__

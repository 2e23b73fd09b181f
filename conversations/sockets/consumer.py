"""The conversation socket: transport only.

It authenticates, joins the conversation's group, turns frames into service calls
(conversations.generation.replies) and group events into rendered frames. What it has shown of
each reply is kept by a TabState; the database is reached only through services.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from datetime import datetime
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.db import DatabaseError
from django.utils import timezone

from conversations.events import broadcast, protocol
from conversations.events.protocol import MessagePayload, message_payload
from conversations.generation import recovery, replies
from conversations.models import Conversation
from conversations.ops import metrics
from conversations.services import branches, sessions
from conversations.services.errors import SendRefused, SessionEnded
from conversations.signals import user_group
from conversations.sockets import slots
from conversations.sockets.frames import CancelFrame, FrameError, SelectFrame, parse_frame
from conversations.sockets.renderers import JSON_SUBPROTOCOL, HtmlRenderer, JsonRenderer, Renderer
from conversations.sockets.tabs import ASK_AGAIN_S, Append, AskSnapshot, Replace, TabState
from conversations.sockets.throttle import SocketFrames
from conversations.types import AnyUser

logger = logging.getLogger("chatsite.socket")

CLOSE_FORBIDDEN = 4403
CLOSE_SERVER_ERROR = 4500
CLOSE_NOT_FOUND = 4404
# Daphne (autobahn) refuses to send the standard 1008 from a server: 4008 says the same.
CLOSE_POLICY_VIOLATION = 4008
CLOSE_SESSION_ENDED = 4401
CLOSE_TOO_MANY_SOCKETS = 4429


class ConversationConsumer(AsyncWebsocketConsumer):  # type: ignore[misc]  # channels is untyped
    conversation: Conversation
    renderer: Renderer
    tab: TabState
    closing = False  # closing or closed: frames still arriving are dropped, nothing more is sent

    async def connect(self) -> None:
        user: AnyUser = self.scope["user"]
        session_key: str | None = self.scope["session"].session_key
        # One trip to the database thread for both: opening sockets by the dozen (tabs reloading,
        # or a script) queues every trip behind everyone else's database work.
        conversation, session_expires = await database_sync_to_async(_opening)(
            user, self.scope["url_route"]["kwargs"]["conversation_id"], session_key
        )
        if conversation is None:
            # Accept first so the client sees our close code rather than a failed handshake.
            await self.accept()
            await self.close(code=CLOSE_FORBIDDEN)
            return
        json_mode = JSON_SUBPROTOCOL in self.scope.get("subprotocols", [])
        self.renderer = JsonRenderer() if json_mode else HtmlRenderer()
        assert user.pk is not None  # a visible conversation means a signed-in user
        slot = await slots.claim(user.pk, self.channel_name)
        if slot is None:
            await self.accept(subprotocol=JSON_SUBPROTOCOL if json_mode else None)
            message = "Too many open tabs or connections. Close some, then reload this page."
            await self._send(self.renderer.error("too_many_sockets", message))
            await self.close(code=CLOSE_TOO_MANY_SOCKETS)
            return
        self.slot = slot
        self.conversation = conversation
        self.username = user.get_username()
        self.user_id: int = user.pk
        self.session_key = session_key
        metrics.socket_opened()  # paired with disconnect(), which checks self.conversation
        self.background = [asyncio.create_task(slots.keep(slot))]
        # Frames wait here for the database, a few at most; meanwhile the consumer goes on
        # reading frames (refusing those over the rate or beyond the queue) and streaming replies.
        self.pending: asyncio.Queue[str | bytes | None] = asyncio.Queue(
            maxsize=settings.CHAT_SOCKET_QUEUED_FRAMES
        )
        self.worker = asyncio.create_task(self._act_on_frames())
        # A silent reply is looked up after three missed flushes (its process may have died).
        self.tab = TabState(quiet_s=max(2.0, 3 * settings.CHAT_FLUSH_INTERVAL_S))
        self.watchdog: asyncio.Task[None] | None = None
        self.gapped: set[int] = set()  # replies whose lost frames this socket has reported
        self.frames = SocketFrames(
            self.user_id,
            socket=(settings.CHAT_SOCKET_FRAMES_PER_SECOND, settings.CHAT_SOCKET_FRAME_BURST),
            user=(settings.CHAT_USER_FRAMES_PER_SECOND, settings.CHAT_USER_FRAME_BURST),
        )
        self.expiry: asyncio.Task[None] | None = None
        await self.channel_layer.group_add(conversation.group_name, self.channel_name)
        await self.channel_layer.group_add(user_group(self.user_id), self.channel_name)
        await self.accept(subprotocol=JSON_SUBPROTOCOL if json_mode else None)
        self.expiry = asyncio.create_task(self._close_at_session_expiry(session_expires))
        # Joined the group before reading the row: whatever happens after this read reaches us.
        latest = await database_sync_to_async(recovery.latest_reply)(conversation=conversation)
        if latest is not None and latest.is_active:
            await self._ask_snapshot(latest.pk)
        else:
            payload = message_payload(latest) if latest is not None else None
            await self._send(self.renderer.settled(payload))

    async def disconnect(self, code: int) -> None:
        self.closing = True  # the frame being acted on sends nothing to a closed socket
        if hasattr(self, "conversation"):
            metrics.socket_closed()
            for task in (self.watchdog, self.expiry, *self.background):
                if task is not None:
                    task.cancel()
            await self.channel_layer.group_discard(self.conversation.group_name, self.channel_name)
            await self.channel_layer.group_discard(user_group(self.user_id), self.channel_name)
            await self._stop_acting_on_frames()
            await slots.release(self.slot)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if not hasattr(self, "conversation") or self.closing:
            # Refused at connect, or closing: the server has read frames the client sent before
            # it saw the close (thousands, from a flood) and hands each one over regardless.
            return
        if not self.frames.allow(self._now()):
            if self.frames.refused_in_a_row > settings.CHAT_SOCKET_FRAME_BURST:
                logger.warning("closing a flooding socket of user %s", self.user_id)
                self.closing = True
                await self.close(code=CLOSE_POLICY_VIOLATION)
            else:
                message = "Too many frames on this connection. Slow down."
                await self._send(self.renderer.error("slow_down", message))
            return  # refused before any database work: a flood costs this socket only
        try:
            # Bytes frames are queued too, so every frame is answered in the order it came.
            self.pending.put_nowait(text_data if text_data is not None else bytes_data or b"")
        except asyncio.QueueFull:
            message = "Still working on your earlier messages. Try again in a moment."
            await self._send(self.renderer.error("busy", message))

    async def _act_on_frames(self) -> None:
        """Act on the socket's frames one at a time, in the order they came."""
        while (frame := await self.pending.get()) is not None:
            try:
                await self._act_on(frame)
            except Exception:
                if self.closing:
                    return  # the client left while its frame was acted on: nothing to answer
                # Nothing else would notice a failure here: say so and close.
                logger.exception("error acting on a frame")
                self.closing = True
                await self.close(code=CLOSE_SERVER_ERROR)
                return

    async def _act_on(self, frame: str | bytes) -> None:
        try:
            text = frame if isinstance(frame, str) else None
            command = parse_frame(text, conversation_id=str(self.conversation.id))
            if isinstance(command, CancelFrame):
                await self._cancel()
                return
            if isinstance(command, SelectFrame):
                if not await self._still_signed_in():
                    return
                await database_sync_to_async(branches.branch_select)(
                    conversation=self.conversation, message_id=command.message_id
                )
                return
            # The session is checked in the same trip to the database as the send is saved: a
            # session that ended (logout, new password...) acts on nothing more.
            await replies.reply_start(
                conversation=self.conversation,
                turn=replies.Turn(command.turn, command.content, command.message_id),
                idempotency_key=command.idempotency_key,
                model_slug=command.model,
                session_key=self.session_key,
                user_id=self.user_id,
            )
        except SessionEnded:
            await self._session_ended()
        except (FrameError, SendRefused) as exc:
            await self._send(self.renderer.error(exc.code, str(exc)))
        except DatabaseError:
            logger.exception("database error handling a frame")
            message = "The server could not save that just now. Please try again."
            await self._send(self.renderer.error("unavailable", message))

    async def _cancel(self) -> None:
        stop = None
        if (writing := self.tab.writing) is not None:
            # The engine hears a Stop for the reply this tab shows before anything waits for the
            # database thread. Stopping one's own reply is harmless, so the session is checked
            # after that, before the Stop is recorded: a session that ended a moment ago can
            # stop a reply, never start one.
            stop = await replies.reply_stop_now(
                conversation=self.conversation, message_id=writing, cancelled_by=self.username
            )
        if not await self._still_signed_in():
            return
        await replies.reply_cancel(
            conversation=self.conversation, cancelled_by=self.username, already_sent=stop
        )

    async def _stop_acting_on_frames(self) -> None:
        """Drop the commands still waiting and let the one under way finish (it may have saved
        a message whose reply must start)."""
        while not self.pending.empty():
            self.pending.get_nowait()
        self.pending.put_nowait(None)
        await self.worker

    async def dispatch(self, message: dict[str, Any]) -> None:
        # Channels closes stale database connections before every handler: a hop to the one
        # database thread, queued behind whatever runs there, for every streamed frame and every
        # frame received (a flood would wait there before it could be refused). Protocol handlers
        # and queued frames reach the database only through services, which clean up themselves.
        if message["type"] in protocol.TAB_EVENT_TYPES:
            await getattr(self, protocol.handler_name(message["type"]))(message)
        elif message["type"] == "websocket.receive":
            await self.websocket_receive(message)
        else:
            await super().dispatch(message)

    # Group events, one handler each ("chat.delta" -> chat_delta).

    async def chat_started(self, message: dict[str, Any]) -> None:
        event = protocol.parse_as(message, protocol.Started)
        # A continued reply starts with the text it goes on from: deltas come after it.
        shown = len(event.message["content"])
        if self.tab.started(event.message_id, self._now(), shown=shown):
            self._watch()
            await self._send(self.renderer.started(event))

    async def chat_delta(self, message: dict[str, Any]) -> None:
        event = protocol.parse_as(message, protocol.Delta)
        action = self.tab.delta(event.message_id, event.offset, event.text, self._now())
        if isinstance(action, AskSnapshot):
            if action.reason == "gap" and event.message_id not in self.gapped:
                # Once per reply: a layer dropping frames drops many, and each gap is repaired.
                self.gapped.add(event.message_id)
                metrics.stream_gap()
                logger.warning(
                    "frames of message %s lost on their way to a tab (first at offset %s); "
                    "resynchronizing it",
                    event.message_id,
                    event.offset,
                )
            await self._request_snapshot(event.message_id)
        elif isinstance(action, Append):
            await self._send(self.renderer.delta(event.message_id, action.offset, action.text))

    async def chat_snapshot(self, message: dict[str, Any]) -> None:
        event = protocol.parse_as(message, protocol.Snapshot)
        text = self.tab.snapshot(event.message_id, event.text, self._now())
        if text is not None:
            await self._send(self.renderer.snapshot(event.message_id, text))

    async def chat_finished(self, message: dict[str, Any]) -> None:
        event = protocol.parse_as(message, protocol.Finished)
        await self._finish(event.message_id, event.message)

    async def _finish(self, message_id: int, saved: MessagePayload) -> None:
        """Show the saved reply's end this tab missed, then its final state (once)."""
        tail = self.tab.catch_up(message_id, saved["content"])
        if isinstance(tail, Replace):
            await self._send(self.renderer.snapshot(message_id, tail.text))
        elif tail is not None:
            logger.info("message %s: %s characters shown at the finish", message_id, len(tail.text))
            await self._send(self.renderer.delta(message_id, tail.offset, tail.text))
        if self.tab.finished(message_id):
            await self._send(self.renderer.finished(saved))

    async def chat_ping(self, message: dict[str, Any]) -> None:
        event = protocol.parse_as(message, protocol.Ping)
        self.tab.pinged(event.message_id, self._now())
        try:
            await broadcast.to_channel(event.reply_channel, protocol.Pong(event.message_id))
        except Exception as exc:  # a full or unreachable channel: the next ping tries again
            logger.warning("pong failed: %r", exc)

    async def chat_sessions_changed(self, message: dict[str, Any]) -> None:
        event = protocol.parse_as(message, protocol.SessionsChanged)
        if event.ended_session and event.ended_session == self.session_key:
            await self._session_ended()
        else:
            await self._still_signed_in()

    async def _still_signed_in(self) -> bool:
        """Re-check the socket's session as a request would; close the socket if it ended."""
        alive: bool = await database_sync_to_async(sessions.session_signs_in)(
            self.session_key, self.user_id
        )
        if not alive:
            await self._session_ended()
        return alive

    async def _session_ended(self) -> None:
        logger.info("session ended: closing a socket of user %s", self.user_id)
        await self._close_for_good(CLOSE_SESSION_ENDED)

    async def _close_for_good(self, code: int) -> None:
        """Show nothing more (events still in flight are dropped) and close with `code`."""
        self.closing = True
        self.tab = TabState(self.tab.quiet_s)
        await self.channel_layer.group_discard(self.conversation.group_name, self.channel_name)
        await self.close(code=code)

    async def _close_at_session_expiry(self, expires: datetime | None) -> None:
        while expires is not None:
            await asyncio.sleep(max(0.0, (expires - timezone.now()).total_seconds()) + 0.5)
            if not await self._still_signed_in():
                return
            expires = await database_sync_to_async(sessions.session_expires_at)(self.session_key)

    async def chat_branch(self, message: dict[str, Any]) -> None:
        """Another version of a turn is shown now (in another tab, maybe another process)."""
        protocol.parse_as(message, protocol.BranchChanged)
        branch = await database_sync_to_async(_branch_payloads)(self.conversation)
        await self._send(self.renderer.branch(branch))

    async def chat_title(self, message: dict[str, Any]) -> None:
        event = protocol.parse_as(message, protocol.TitleChanged)
        await self._send(self.renderer.title(self.conversation.pk, event.title))

    async def chat_deleted(self, message: dict[str, Any]) -> None:
        """The conversation was deleted (in another tab or through the API): say so, and close."""
        await self._send(
            self.renderer.error("conversation_deleted", "This conversation was deleted.")
        )
        await self._close_for_good(CLOSE_NOT_FOUND)

    async def _ask_snapshot(self, message_id: int) -> None:
        self.tab.resync(message_id, self._now())
        await self._request_snapshot(message_id)

    async def _request_snapshot(self, message_id: int) -> None:
        self._watch()
        try:
            await replies.reply_sync(
                conversation=self.conversation,
                message_id=message_id,
                reply_channel=self.channel_name,
            )
        except Exception as exc:  # the watchdog asks again
            logger.warning("snapshot request failed: %r", exc)

    def _watch(self) -> None:
        if self.watchdog is None or self.watchdog.done():
            self.watchdog = asyncio.create_task(self._settle_silent_replies())

    async def _settle_silent_replies(self) -> None:
        """Group messages can be lost (a full channel drops them; Redis can restart), so a reply
        this socket hears nothing about for a while is looked up in the database instead."""
        while self.tab.following:
            await asyncio.sleep(min(self.tab.quiet_s / 2, ASK_AGAIN_S / 2))
            for message_id in self.tab.unanswered(self._now()):
                await self._request_snapshot(message_id)
            for message_id in self.tab.silent(self._now()):
                try:
                    state = await database_sync_to_async(recovery.reply_state)(
                        conversation=self.conversation, message_id=message_id
                    )
                except DatabaseError as exc:  # the database is away: keep waiting, ask later
                    logger.warning("could not look up reply %s: %r", message_id, exc)
                    continue
                if state.active:
                    await self._ask_snapshot(message_id)  # still running somewhere: ask again
                elif state.message is not None:
                    await self._finish(message_id, state.message)
                else:
                    self.tab.finished(message_id)  # deleted meanwhile: stop following it

    @staticmethod
    def _now() -> float:
        return time.monotonic()

    async def _send(self, frame: str | None) -> None:
        if frame is not None and not self.closing:
            await self.send(text_data=frame)


def _opening(
    user: AnyUser, conversation_id: uuid.UUID, session_key: str | None
) -> tuple[Conversation | None, datetime | None]:
    """The conversation, if the user may see it, and when the socket's session expires."""
    conversation = Conversation.objects.visible_to(user).filter(pk=conversation_id).first()
    if conversation is None:
        return None, None
    return conversation, sessions.session_expires_at(session_key)


class NotFoundConsumer(AsyncWebsocketConsumer):  # type: ignore[misc]  # channels is untyped
    """A socket on a path chatsite does not serve: accepted only to be closed with 4404."""

    async def connect(self) -> None:
        await self.accept()
        await self.close(code=CLOSE_NOT_FOUND)


def _branch_payloads(conversation: Conversation) -> list[MessagePayload]:
    conversation.refresh_from_db(fields=["current_leaf"])
    return [message_payload(message) for message in branches.visible_branch(conversation)]

"""The conversation socket: transport only.

It authenticates, joins the conversation's group, turns frames into service calls and group
events into rendered frames, through small objects it owns: SocketFrames limits how fast frames
may come, a FrameQueue acts on them one at a time (Commands: the service call each asks for), a
TabStream shows the conversation's branch and the replies streaming in it (its TabState keeps
what it has shown, its Watchdog re-asks for what the group lost), a SessionWatch closes the
socket when its session ends, and a slots.Lease counts the socket against its user's. The
database is reached only through services.
"""

from __future__ import annotations

import functools
import logging
import time
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _

from conversations.events import protocol
from conversations.generation import temporary
from conversations.models import Conversation
from conversations.ops import metrics
from conversations.services import sessions
from conversations.services.conversations import conversation_model
from conversations.signals import user_group
from conversations.sockets import slots
from conversations.sockets.commands import Commands
from conversations.sockets.frame_queue import BUSY, FrameQueue
from conversations.sockets.html_renderer import HtmlRenderer
from conversations.sockets.renderers import JSON_SUBPROTOCOL, Frames, JsonRenderer, Renderer
from conversations.sockets.session_watch import SessionWatch
from conversations.sockets.stream import TabStream
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

TOO_MANY_SOCKETS = _("Too many open tabs or connections. Close some, then reload this page.")
SLOW_DOWN = _("Too many frames on this connection. Slow down.")
MODEL_LOST = _("You no longer have access to this conversation's model. Reload to choose another.")


# Over 150 lines: Channels looks up a handler per group event on the consumer itself, and the
# teardown (__call__, _let_go) must be where every way a socket ends passes.
class ConversationConsumer(AsyncWebsocketConsumer):  # type: ignore[misc]  # channels is untyped
    conversation: Conversation
    renderer: Renderer
    stream: TabStream
    closing = False  # closing or closed: frames still arriving are dropped, nothing more is sent
    let_go = False  # what connect() took is given back, or being given back

    async def connect(self) -> None:
        user: AnyUser = self.scope["user"]
        session_key: str | None = self.scope["session"].session_key
        # One trip to the database thread for both: opening sockets by the dozen (tabs reloading,
        # or a script) queues every trip behind everyone else's database work.
        conversation_id = self.scope["url_route"]["kwargs"]["conversation_id"]
        opening = await database_sync_to_async(sessions.socket_opening)(
            user=user, conversation_id=conversation_id, session_key=session_key
        )
        if opening is None:
            # Accept first so the client sees our close code rather than a failed handshake.
            await self.accept()
            await self.close(code=CLOSE_FORBIDDEN)
            return
        json_mode = JSON_SUBPROTOCOL in self.scope.get("subprotocols", [])
        subprotocol = JSON_SUBPROTOCOL if json_mode else None
        frame_bytes = settings.CHAT_SOCKET_FRAME_BYTES
        self.renderer = (
            JsonRenderer(frame_bytes)
            if json_mode
            else HtmlRenderer(opening.conversation.pk, frame_bytes)
        )
        assert user.pk is not None  # a visible conversation means a signed-in user
        lease = await slots.lease(user.pk, self.channel_name)
        if lease is None:
            await self.accept(subprotocol=subprotocol)
            await self._send_error("too_many_sockets", TOO_MANY_SOCKETS)
            await self.close(code=CLOSE_TOO_MANY_SOCKETS)
            return
        self.lease = lease
        conversation = opening.conversation
        self.user_id: int = user.pk
        self.stream = TabStream(conversation, self.renderer, self._send, self.channel_name)
        ended = functools.partial(self._close_for_good, CLOSE_SESSION_ENDED)
        self.session = SessionWatch(session_key, user.pk, ended=ended)
        self.frames = SocketFrames.from_settings(user.pk)
        commands = Commands(
            conversation, user.get_username(), self.session, self.stream.tab, self._send_error
        )
        self.queue = FrameQueue(
            commands.act, size=settings.CHAT_SOCKET_QUEUED_FRAMES, failed=self._frame_failed
        )
        # Set once everything _let_go() stops exists: it stops them only if this is set.
        self.conversation = conversation
        metrics.socket_opened()  # paired with _let_go(), which checks self.conversation
        await self.channel_layer.group_add(conversation.group_name, self.channel_name)
        await self.channel_layer.group_add(user_group(self.user_id), self.channel_name)
        await self.accept(subprotocol=subprotocol)
        self.session.close_at_expiry(opening.session_expires)
        # Joined the group before reading the row: whatever happens after this read reaches us.
        await self.stream.joined()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            # Channels calls disconnect() only for a close it reads: a handler that raised (a
            # frame the server refused to send) or a task cancelled (the server gave up waiting
            # for it to end) ends the socket without one, and would leave its slot taken for good
            # (renewed by a task of its own) and its tasks running.
            await self._let_go()

    async def disconnect(self, code: int) -> None:
        await self._let_go()

    async def _let_go(self) -> None:
        """Give back what connect() took, once however the socket ends (called again, it does
        nothing more): the slot last, and even if giving back the rest failed."""
        self.closing = True  # the frame being acted on sends nothing to a closed socket
        try:
            if hasattr(self, "conversation") and not self.let_go:
                self.let_go = True
                metrics.socket_closed()
                self.stream.stop()
                self.session.stop()
                await self.channel_layer.group_discard(
                    self.conversation.group_name, self.channel_name
                )
                await self.channel_layer.group_discard(user_group(self.user_id), self.channel_name)
                await self.queue.stop()
                if self.conversation.temporary:  # gone once no tab is left on it
                    temporary.sweep_later(self.conversation.pk)
        finally:
            if hasattr(self, "lease"):
                await self.lease.end()

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if not hasattr(self, "conversation") or self.closing:
            # Refused at connect, or closing: the server has read frames the client sent before
            # it saw the close (thousands, from a flood) and hands each one over regardless.
            return
        if not self.frames.allow(time.monotonic()):
            if self.frames.flooding:
                logger.warning("closing a flooding socket of user %s", self.user_id)
                self.closing = True
                await self.close(code=CLOSE_POLICY_VIOLATION)
            else:
                await self._send_error("slow_down", SLOW_DOWN)
            return  # refused before any database work: a flood costs this socket only
        # Bytes frames are queued too, so every frame is answered in the order it came.
        if not self.queue.put(text_data if text_data is not None else bytes_data or b""):
            await self._send_error("busy", BUSY)

    async def _frame_failed(self, error: Exception) -> None:
        if self.closing:
            return  # the client left while its frame was acted on: nothing to answer
        # Nothing else would notice a failure here: say so and close.
        logger.error("error acting on a frame", exc_info=error)
        self.closing = True
        await self.close(code=CLOSE_SERVER_ERROR)

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
        await self.stream.started(protocol.parse_as(message, protocol.Started))

    async def chat_delta(self, message: dict[str, Any]) -> None:
        await self.stream.delta(protocol.parse_as(message, protocol.Delta))

    async def chat_snapshot(self, message: dict[str, Any]) -> None:
        await self.stream.snapshot(protocol.parse_as(message, protocol.Snapshot))

    async def chat_finished(self, message: dict[str, Any]) -> None:
        event = protocol.parse_as(message, protocol.Finished)
        await self.stream.finish(event.message_id, event.message)

    async def chat_ping(self, message: dict[str, Any]) -> None:
        await self.stream.ping(protocol.parse_as(message, protocol.Ping))

    async def chat_sessions_changed(self, message: dict[str, Any]) -> None:
        event = protocol.parse_as(message, protocol.SessionsChanged)
        await self.session.changed(event.ended_session)

    async def chat_models_lost(self, message: dict[str, Any]) -> None:
        """The user left groups: a tab on a conversation of a model they lost closes."""
        event = protocol.parse_as(message, protocol.ModelsLost)
        model = await database_sync_to_async(conversation_model)(conversation=self.conversation)
        if model and model not in event.models_kept:
            await self._send_error("model_unavailable", MODEL_LOST)
            await self._close_for_good(CLOSE_FORBIDDEN)

    async def chat_branch(self, message: dict[str, Any]) -> None:
        """Another version of a turn is shown now (in another tab, maybe another process)."""
        protocol.parse_as(message, protocol.BranchChanged)
        await self.stream.branch_changed()

    async def chat_title(self, message: dict[str, Any]) -> None:
        event = protocol.parse_as(message, protocol.TitleChanged)
        await self._send(self.renderer.title(self.conversation.pk, event.title))

    async def chat_anyone_here(self, message: dict[str, Any]) -> None:
        """A temporary chat is about to be deleted unless a tab is open on it: this one is."""
        event = protocol.parse_as(message, protocol.AnyoneHere)
        await self.stream.here(event.reply_channel)

    async def chat_deleted(self, message: dict[str, Any]) -> None:
        """The conversation was deleted (in another tab or through the API): say so, and close."""
        await self._send_error("conversation_deleted", _("This conversation was deleted."))
        await self._close_for_good(CLOSE_NOT_FOUND)

    async def _close_for_good(self, code: int) -> None:
        """Show nothing more (events still in flight are dropped) and close with `code`."""
        self.closing = True
        self.stream.forget()
        await self.channel_layer.group_discard(self.conversation.group_name, self.channel_name)
        await self.close(code=code)

    async def _send(self, frames: Frames) -> None:
        for frame in frames:
            if self.closing:
                return
            await self.send(text_data=frame)

    async def _send_error(self, code: str, message: str | Promise) -> None:
        # str() here, in the socket's language: the texts above are lazy.
        await self._send(self.renderer.error(code, str(message)))


class NotFoundConsumer(AsyncWebsocketConsumer):  # type: ignore[misc]  # channels is untyped
    """A socket on a path chatsite does not serve: accepted only to be closed with 4404."""

    async def connect(self) -> None:
        await self.accept()
        await self.close(code=CLOSE_NOT_FOUND)

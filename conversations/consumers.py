"""The conversation socket: transport only. The generation lifecycle lives in services.generation."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.db import DatabaseError

from conversations import metrics
from conversations.events import JSON_SUBPROTOCOL, HtmlRenderer, JsonRenderer
from conversations.frames import CancelFrame, FrameError, parse_frame
from conversations.models import Conversation, Message
from conversations.services import generation
from conversations.services.errors import SendRefused
from conversations.services.recovery import replies_mark_interrupted

logger = logging.getLogger("chatsite.socket")

CLOSE_FORBIDDEN = 4403
_NO_DATABASE = {
    "chat.started",
    "chat.delta",
    "chat.ping",
    "chat.snapshot",
    "generation.cancel",
    "generation.sync",
}


class ConversationConsumer(AsyncWebsocketConsumer):
    conversation: Conversation

    async def connect(self) -> None:
        user = self.scope["user"]
        conversation_id = self.scope["url_route"]["kwargs"]["conversation_id"]
        conversation = await _visible_conversation(user, conversation_id)
        if conversation is None:
            # Accept first so the client sees our close code rather than a failed handshake.
            await self.accept()
            await self.close(code=CLOSE_FORBIDDEN)
            return
        self.conversation = conversation
        metrics.socket_opened()  # paired with disconnect(), which checks self.conversation
        self.user = user
        json_mode = JSON_SUBPROTOCOL in self.scope.get("subprotocols", [])
        self.renderer = JsonRenderer() if json_mode else HtmlRenderer()
        # message id -> characters of it this socket has shown; None while waiting for a snapshot.
        self.shown: dict[int, int | None] = {}
        # message id -> when this socket last heard anything about it (see _settle_silent_replies).
        self.last_heard: dict[int, float] = {}
        self.watchdog: asyncio.Task[None] | None = None
        self.settled: set[int] = set()
        await self.channel_layer.group_add(conversation.group_name, self.channel_name)
        await self.accept(subprotocol=JSON_SUBPROTOCOL if json_mode else None)
        # Joined the group before reading the row: whatever happens after this read reaches us.
        await database_sync_to_async(replies_mark_interrupted)(conversation=conversation)
        latest = await _latest_reply(conversation)
        if latest is not None and latest.is_active:
            await self._resync(latest.pk)
        else:
            await self._send(self.renderer.settled(latest))

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "conversation"):
            metrics.socket_closed()
            if self.watchdog is not None:
                self.watchdog.cancel()
            await self.channel_layer.group_discard(self.conversation.group_name, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if not hasattr(self, "conversation"):
            return  # refused at connect: a frame sent before the client saw the close
        try:
            frame = parse_frame(text_data, conversation_id=str(self.conversation.id))
            if isinstance(frame, CancelFrame):
                await generation.reply_cancel(
                    conversation=self.conversation, cancelled_by=self.user.get_username()
                )
                return
            await generation.reply_start(
                conversation=self.conversation,
                content=frame.content,
                idempotency_key=frame.idempotency_key,
            )
        except FrameError as exc:
            await self._send(self.renderer.error(exc.code, exc.message))
        except SendRefused as exc:
            await self._send(self.renderer.error(exc.code, str(exc)))
        except DatabaseError:
            logger.exception("database error handling a frame")
            message = "The server could not save that just now. Please try again."
            await self._send(self.renderer.error("unavailable", message))

    async def dispatch(self, message: dict[str, Any]) -> None:
        # Channels closes stale database connections before every handler: a hop to the one
        # sync thread, queued behind whatever database work runs there, for every streamed
        # frame. These handlers touch no database (what they call cleans up by itself).
        if message["type"] in _NO_DATABASE:
            await getattr(self, message["type"].replace(".", "_"))(message)
        else:
            await super().dispatch(message)

    # Group events, one handler each ("chat.delta" -> chat_delta).

    async def chat_started(self, event: dict[str, Any]) -> None:
        # A delta that overtook this event has already asked for a snapshot: keep waiting for it.
        self.shown.setdefault(event["message_id"], 0)
        self._heard(event["message_id"])
        await self._send(self.renderer.started(event))

    async def chat_delta(self, event: dict[str, Any]) -> None:
        message_id, offset, text = event["message_id"], event["offset"], event["text"]
        shown = self.shown.get(message_id)
        if message_id in self.settled:
            return
        if shown is None:
            # Not "heard": if our snapshot request was lost, the watchdog must ask again.
            if message_id not in self.shown:
                await self._resync(message_id)
            return  # the snapshot we asked for covers this delta
        if offset > shown:
            # Frames were lost (a full channel drops them silently): start again from a snapshot.
            logger.warning("gap in message %s: have %s, got offset %s", message_id, shown, offset)
            await self._resync(message_id)
            return
        self._heard(message_id)
        if offset + len(text) <= shown:
            return
        self.shown[message_id] = offset + len(text)
        await self._send(self.renderer.delta(message_id, shown, text[shown - offset :]))

    async def chat_snapshot(self, event: dict[str, Any]) -> None:
        if event["message_id"] in self.settled:
            return  # a late answer: the finished reply is already shown
        self._heard(event["message_id"])
        self.shown[event["message_id"]] = len(event["text"])
        await self._send(self.renderer.snapshot(event["message_id"], event["text"]))

    async def chat_finished(self, event: dict[str, Any]) -> None:
        if event["message_id"] in self.settled:
            return  # already settled from the database; the late event changes nothing
        self.settled.add(event["message_id"])
        self.shown.pop(event["message_id"], None)
        self.last_heard.pop(event["message_id"], None)
        reply = await database_sync_to_async(Message.objects.filter(pk=event["message_id"]).first)()
        if reply is not None:  # None: the conversation was deleted meanwhile
            await self._send(self.renderer.finished(reply))

    async def chat_ping(self, event: dict[str, Any]) -> None:
        if self.shown.get(event["message_id"]) is not None:
            self._heard(event["message_id"])
        pong = {"type": "generation.pong", "message_id": event["message_id"]}
        try:
            await self.channel_layer.send(event["reply_channel"], pong)
        except Exception as exc:  # a full or unreachable channel: the next ping tries again
            logger.warning("pong failed: %r", exc)

    # Events meant for the generation; every member of the group receives them.
    async def generation_cancel(self, event: dict[str, Any]) -> None:
        pass

    async def generation_sync(self, event: dict[str, Any]) -> None:
        pass

    async def _resync(self, message_id: int) -> None:
        self.shown[message_id] = None
        self._heard(message_id)
        await self.channel_layer.group_send(
            self.conversation.group_name,
            {
                "type": "generation.sync",
                "message_id": message_id,
                "reply_channel": self.channel_name,
            },
        )

    def _heard(self, message_id: int) -> None:
        self.last_heard[message_id] = time.monotonic()
        if self.watchdog is None or self.watchdog.done():
            self.watchdog = asyncio.create_task(self._settle_silent_replies())

    async def _settle_silent_replies(self) -> None:
        """Group messages can be lost (a full channel drops them; Redis can restart), so a reply
        this socket hears nothing about for a while is settled from the database instead."""
        quiet = max(2.0, 3 * settings.CHAT_FLUSH_INTERVAL_S)
        while self.last_heard:
            await asyncio.sleep(quiet / 2)
            for message_id, heard in list(self.last_heard.items()):
                if time.monotonic() - heard < quiet:
                    continue
                await database_sync_to_async(replies_mark_interrupted)(
                    conversation=self.conversation
                )
                reply = await database_sync_to_async(Message.objects.filter(pk=message_id).first)()
                if reply is not None and reply.is_active:
                    await self._resync(message_id)  # still running somewhere: ask it again
                else:
                    await self.chat_finished({"message_id": message_id})

    async def _send(self, frame: str | None) -> None:
        if frame is not None:
            await self.send(text_data=frame)


@database_sync_to_async
def _visible_conversation(user: Any, conversation_id: Any) -> Conversation | None:
    return Conversation.objects.visible_to(user).filter(pk=conversation_id).first()


@database_sync_to_async
def _latest_reply(conversation: Conversation) -> Message | None:
    return conversation.messages.filter(role=Message.Role.ASSISTANT).last()

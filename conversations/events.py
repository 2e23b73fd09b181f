"""One event shape, two renderers: htmx HTML fragments for the browser, JSON for API clients.

The consumer hands every event it sends to a socket to one of these; nothing else writes to a
socket, so the two protocols cannot drift apart.
"""

from __future__ import annotations

import json
from typing import Any

from django.template.loader import render_to_string

from conversations.api.serializers import message_data
from conversations.models import Conversation, Message

JSON_SUBPROTOCOL = "chatsite.v1.json"


class JsonRenderer:
    def started(self, event: dict[str, Any]) -> str:
        return _json(
            type="message.started", user_message=event["user_message"], message=event["message"]
        )

    def delta(self, message_id: int, offset: int, text: str) -> str:
        return _json(type="message.delta", message_id=message_id, offset=offset, text=text)

    def snapshot(self, message_id: int, text: str) -> str:
        return _json(type="message.snapshot", message_id=message_id, offset=0, text=text)

    def finished(self, reply: Message) -> str:
        return _json(type="message.finished", message=message_data(reply))

    def settled(self, reply: Message | None) -> str | None:
        return None  # JSON clients read history through the REST API

    def error(self, code: str, message: str) -> str:
        return _json(type="error", code=code, message=message)


class HtmlRenderer:
    def started(self, event: dict[str, Any]) -> str:
        # Rendered from the event's data, not the database: this is on every tab's path to the
        # first token.
        conversation = Conversation(id=event["conversation_id"], title=event["title"])
        reply = Message(conversation=conversation, **_template_fields(event["message"]))
        return render_to_string(
            "conversations/events/started.html",
            {
                "user_message": Message(**_template_fields(event["user_message"])),
                "reply": reply,
                "streaming": True,
            },
        )

    def delta(self, message_id: int, offset: int, text: str) -> str:
        return render_to_string(
            "conversations/events/delta.html", {"message_id": message_id, "text": text}
        )

    def snapshot(self, message_id: int, text: str) -> str:
        return render_to_string(
            "conversations/events/snapshot.html", {"message_id": message_id, "text": text}
        )

    def finished(self, reply: Message | None) -> str:
        return render_to_string(
            "conversations/events/finished.html", {"reply": reply, "streaming": False}
        )

    def settled(self, reply: Message | None) -> str | None:
        """The saved state, for a socket that (re)connects when nothing is streaming."""
        return self.finished(reply)

    def error(self, code: str, message: str) -> str:
        return render_to_string(
            "conversations/events/error.html", {"code": code, "message": message}
        )


def started_event_data(user_message: Message, reply: Message) -> dict[str, Any]:
    """What a chat.started group event carries, so tabs render it without a query."""
    conversation = reply.conversation
    return {
        "user_message": message_data(user_message),
        "message": message_data(reply),
        "conversation_id": str(conversation.pk),
        "title": conversation.title,
    }


def _template_fields(data: dict[str, Any]) -> dict[str, Any]:
    return {
        name: data[name] for name in ("id", "role", "content", "status", "cancelled_by", "error")
    }


def _json(**fields: Any) -> str:
    return json.dumps(fields, ensure_ascii=False)

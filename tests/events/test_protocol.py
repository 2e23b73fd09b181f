"""The group's events: one namespace, typed, and the same message shape as the REST API."""

from __future__ import annotations

from typing import Any

import pytest

from conversations.api.serializers import MessageSerializer
from conversations.events import payloads, protocol
from conversations.models import Message


def test_every_event_type_is_in_one_namespace_and_tab_events_have_a_consumer_handler() -> None:
    from conversations.sockets.consumer import ConversationConsumer

    assert (
        protocol.TAB_EVENT_TYPES
        | {
            "chat.cancel",
            "chat.sync",
            "chat.pong",
            "chat.token_revoked",  # to the gateway's calls made with a token
            "chat.here",  # to whoever asked whether a temporary chat has a tab open
        }
        == protocol.EVENT_TYPES
    )
    for event_type in protocol.EVENT_TYPES:
        assert event_type.startswith("chat.")
    for event_type in protocol.TAB_EVENT_TYPES:
        assert callable(getattr(ConversationConsumer, protocol.handler_name(event_type)))


def test_an_event_survives_the_channel_layer_as_itself() -> None:
    import msgpack  # what channels-redis serializes with

    event = protocol.Cancel(message_id=None, requested_at=1.5, cancelled_by="alice")
    message = msgpack.unpackb(msgpack.packb(event.as_message()))
    assert message["type"] == "chat.cancel"
    assert protocol.parse(message) == event


@pytest.mark.django_db
def test_the_socket_shows_a_message_exactly_as_the_api_does(conversation: Any) -> None:
    reply = Message.objects.create(
        conversation=conversation,
        role=Message.Role.ASSISTANT,
        content="done",
        engine="scripted",
        completion_tokens=3,
        finish_reason="stop",
    )
    reply.refresh_from_db()
    assert dict(payloads.message_payload(reply)) == dict(MessageSerializer(reply).data)

"""The JSON shapes of conversations and messages, for the REST API, the exports and the socket."""

from typing import Any

from rest_framework import serializers

from conversations.models import Conversation, Message


class MessageSerializer(serializers.ModelSerializer[Message]):
    ttft_ms = serializers.FloatField(read_only=True, allow_null=True)
    tokens_per_second = serializers.FloatField(read_only=True, allow_null=True)
    duration_s = serializers.FloatField(read_only=True, allow_null=True)

    class Meta:
        model = Message
        fields = [
            "id",
            "role",
            "content",
            "status",
            "engine",
            "model",
            "request_id",
            "created_at",
            "first_token_at",
            "finished_at",
            "prompt_tokens",
            "completion_tokens",
            "finish_reason",
            "ttft_ms",
            "tokens_per_second",
            "duration_s",
            "cancel_requested_at",
            "cancel_confirmed_at",
            "cancel_latency_ms",
            "cancelled_by",
            "error",
        ]
        read_only_fields = fields


class ConversationSerializer(serializers.ModelSerializer[Conversation]):
    owner = serializers.CharField(source="owner.get_username", read_only=True)

    class Meta:
        model = Conversation
        fields = ["id", "title", "title_is_custom", "owner", "created_at", "updated_at"]
        read_only_fields = fields


class ConversationSummarySerializer(ConversationSerializer):
    """A row of the list; the queryset annotates message_count."""

    message_count = serializers.IntegerField(read_only=True)

    class Meta(ConversationSerializer.Meta):
        fields = [*ConversationSerializer.Meta.fields, "message_count"]
        read_only_fields = fields


class ConversationDetailSerializer(ConversationSerializer):
    """A conversation with its messages: the detail endpoint and every JSON export."""

    messages = MessageSerializer(many=True, read_only=True)

    class Meta(ConversationSerializer.Meta):
        fields = [*ConversationSerializer.Meta.fields, "messages"]
        read_only_fields = fields


class ConversationFilterSerializer(serializers.Serializer[dict[str, Any]]):
    """The query string of the list and the JSONL export."""

    q = serializers.CharField(
        required=False, allow_blank=True, max_length=200, help_text="Text in a title or message."
    )
    since = serializers.DateTimeField(
        required=False, help_text="Last active at or after this time (ISO 8601)."
    )
    until = serializers.DateTimeField(
        required=False, help_text="Last active before this time (ISO 8601)."
    )


_message_serializer = MessageSerializer()


def message_data(message: Message) -> dict[str, Any]:
    """A message as the socket's JSON protocol, the REST API and the exports show it."""
    # One unbound serializer is reused: building a ModelSerializer's fields is its costly part.
    return dict(_message_serializer.to_representation(message))

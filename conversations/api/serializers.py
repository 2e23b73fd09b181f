"""The JSON shapes of conversations and messages, for the REST API, the exports and the socket."""

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from conversations.events.payloads import FeedbackPayload, feedback_payload
from conversations.models import Attachment, Conversation, Message, ShareLink
from conversations.services import branches


class AttachmentSerializer(serializers.ModelSerializer[Attachment]):
    kind = serializers.CharField(read_only=True, help_text="Its MIME type, judged from its bytes.")
    size = serializers.IntegerField(read_only=True, help_text="Bytes.")
    text = serializers.CharField(
        read_only=True,
        help_text="The text read from it, as the model was given it; empty for an image.",
    )

    class Meta:
        model = Attachment
        fields = ["id", "name", "kind", "size", "text"]
        read_only_fields = fields


class MessageSerializer(serializers.ModelSerializer[Message]):
    version = serializers.SerializerMethodField(
        help_text="[index, count, previous id, next id] among the versions of its turn "
        "(regenerated replies, edited messages); null where not worked out."
    )
    is_current = serializers.SerializerMethodField(
        help_text="On the branch shown (and sent to the model); null where not worked out."
    )
    ttft_ms = serializers.FloatField(read_only=True, allow_null=True)
    tokens_per_second = serializers.FloatField(read_only=True, allow_null=True)
    duration_s = serializers.FloatField(read_only=True, allow_null=True)
    attachments = AttachmentSerializer(
        many=True, read_only=True, help_text="The files a user message was sent with."
    )
    feedback = serializers.SerializerMethodField(
        help_text="Your rating of a reply: {rating: up or down, reason}; null when not rated."
    )

    class Meta:
        model = Message
        fields = [
            "id",
            "parent",
            "role",
            "content",
            "reasoning",
            "status",
            "engine",
            "model",
            "model_slug",
            "model_name",
            "system_prompt",
            "temperature",
            "max_tokens",
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
            "version",
            "is_current",
            "attachments",
            "tool_calls",
            "tool_call_id",
            "feedback",
        ]
        read_only_fields = fields

    @extend_schema_field(
        {
            "type": "object",
            "nullable": True,
            "properties": {
                "rating": {"type": "string", "enum": ["up", "down"]},
                "reason": {"type": "string"},
            },
        }
    )
    def get_feedback(self, message: Message) -> FeedbackPayload | None:
        return feedback_payload(message)

    def get_version(self, message: Message) -> list[int | None] | None:
        return message.version.as_list() if message.version is not None else None

    def get_is_current(self, message: Message) -> bool | None:
        return message.is_current


class ConversationSerializer(serializers.ModelSerializer[Conversation]):
    owner = serializers.CharField(source="owner.get_username", read_only=True)
    pinned = serializers.BooleanField(read_only=True, help_text="Listed first in the sidebar.")
    archived = serializers.BooleanField(
        read_only=True, help_text="Out of the sidebar, on the Archive page."
    )
    project = serializers.IntegerField(
        source="project_id",
        read_only=True,
        allow_null=True,
        help_text="The id of the project it is in; null: none.",
    )
    project_name = serializers.CharField(
        source="project.name",
        read_only=True,
        allow_null=True,
        default=None,
        help_text="That project's name (an import files it in your project of that name).",
    )

    class Meta:
        model = Conversation
        fields = [
            "id",
            "title",
            "title_is_custom",
            "owner",
            "created_at",
            "updated_at",
            "pinned",
            "archived",
            "project",
            "project_name",
            "temporary",
        ]
        read_only_fields = fields


class ConversationSummarySerializer(ConversationSerializer):
    """A row of the list; the queryset annotates message_count."""

    message_count = serializers.IntegerField(read_only=True)

    class Meta(ConversationSerializer.Meta):
        fields = [*ConversationSerializer.Meta.fields, "message_count"]
        read_only_fields = fields


class ConversationDetailSerializer(ConversationSerializer):
    """A conversation with its messages: the detail endpoint and every JSON export."""

    model = serializers.CharField(
        source="model_slug",
        read_only=True,
        help_text="The slug of the model its next reply uses (see /api/models/); empty: your "
        "default model.",
    )
    messages = MessageSerializer(many=True, read_only=True)
    current_message = serializers.IntegerField(
        source="current_leaf_id",
        read_only=True,
        allow_null=True,
        help_text="The last message of the branch shown; follow `parent` up from it. Messages "
        "off that branch are other versions of a turn (regenerated, edited).",
    )

    class Meta(ConversationSerializer.Meta):
        fields = [
            *ConversationSerializer.Meta.fields,
            "model",
            "system_prompt",
            "temperature",
            "max_tokens",
            "current_message",
            "messages",
        ]
        read_only_fields = fields

    def to_representation(self, instance: Conversation) -> dict[str, Any]:
        # Every version of every turn, each saying where it stands (one pass over the messages
        # prefetched with the conversation; their instances are the ones serialized below).
        branches.place_all(list(instance.messages.all()), instance.current_leaf_id)
        return dict(super().to_representation(instance))


class ConversationChangeSerializer(serializers.Serializer[dict[str, Any]]):
    """What PATCH may change; null for the last three means "the model's default"."""

    title = serializers.CharField(required=False, max_length=200)
    model = serializers.CharField(
        required=False, max_length=50, help_text="A slug from /api/models/."
    )
    system_prompt = serializers.CharField(
        required=False, allow_null=True, allow_blank=True, trim_whitespace=False
    )
    temperature = serializers.FloatField(required=False, allow_null=True)
    max_tokens = serializers.IntegerField(required=False, allow_null=True)
    pinned = serializers.BooleanField(required=False)
    archived = serializers.BooleanField(required=False)
    project = serializers.IntegerField(
        required=False, allow_null=True, help_text="The id of a project of yours; null: none."
    )


class ChatModelSerializer(serializers.Serializer[Any]):
    """A model the caller may use, with its defaults and the bounds a conversation may set."""

    slug = serializers.CharField()
    name = serializers.CharField()
    backend = serializers.CharField()
    status = serializers.ChoiceField(
        choices=["ready", "loading", "unavailable", "not_loaded"],
        help_text="In the process that answered: loaded, loading, failed to load, or not "
        "asked for yet.",
    )
    context_tokens = serializers.IntegerField()
    system_prompt = serializers.CharField(help_text="The default for new conversations.")
    temperature = serializers.FloatField()
    max_tokens = serializers.IntegerField()
    max_temperature = serializers.FloatField()
    max_tokens_limit = serializers.IntegerField()


class ConversationFilterSerializer(serializers.Serializer[dict[str, Any]]):
    """The query string of the list and the JSONL export."""

    q = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=200,
        help_text="Text in a title or message, with any of the filters project:<name>, "
        "pinned:yes|no, archived:yes|no, model:<slug>, before:YYYY-MM-DD and after:YYYY-MM-DD "
        '(a quoted value may hold spaces: project:"Q3 plan"). A bad filter value answers 400.',
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


class ShareLinkSerializer(serializers.ModelSerializer[ShareLink]):
    """One of a conversation's share links; its URL is shown only when it is created."""

    message_count = serializers.IntegerField(
        read_only=True, help_text="How many messages its snapshot holds."
    )
    is_active = serializers.BooleanField(read_only=True, help_text="Not revoked.")

    class Meta:
        model = ShareLink
        fields = ["id", "title", "message_count", "created_at", "revoked_at", "is_active"]
        read_only_fields = fields


class ShareLinkCreatedSerializer(ShareLinkSerializer):
    """A link just made, with its URL (from the context: the token itself is not stored)."""

    url = serializers.SerializerMethodField(
        help_text="The absolute link to give readers. Only its hash is stored: it is shown "
        "this once."
    )

    class Meta(ShareLinkSerializer.Meta):
        fields = ["url", *ShareLinkSerializer.Meta.fields]
        read_only_fields = fields

    @extend_schema_field(OpenApiTypes.URI)
    def get_url(self, share: ShareLink) -> str:
        return str(self.context["url"])

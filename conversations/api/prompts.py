"""REST endpoints over the prompt library: list and read the caller's prompts and those shared
with their groups; create, change and delete their own. A shared prompt is read-only (403 on a
write); anyone else's answers 404."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import exceptions, generics, serializers

from conversations.models import SavedPrompt, SavedPromptQuerySet
from conversations.services.saved_prompts import prompt_create, prompt_delete, prompt_update
from conversations.types import User


class OwnGroupField(serializers.PrimaryKeyRelatedField[Group]):
    """A group by id, among the caller's own: another group is refused as if it did not exist."""

    def get_queryset(self) -> Any:
        request = self.context.get("request")
        if request is None:  # the schema, which only needs the model
            return Group.objects.none()
        return request.user.groups.all()


class SavedPromptSerializer(serializers.ModelSerializer[SavedPrompt]):
    owner = serializers.CharField(source="owner.get_username", read_only=True)
    mine = serializers.SerializerMethodField(help_text="Yours, so you may change it.")
    variables = serializers.ListField(
        child=serializers.CharField(),
        read_only=True,
        help_text="The names of its `{{name}}` variables, in the order they first appear.",
    )
    text = serializers.CharField(
        trim_whitespace=False,
        help_text="What goes in the message box; `{{name}}` marks a value asked for each time.",
    )
    group = OwnGroupField(
        queryset=Group.objects.all(),
        allow_null=True,
        required=False,
        error_messages={"does_not_exist": "Share it with one of your own groups."},
        help_text="The id of one of your groups it is shared with, read-only; null: only you.",
    )

    class Meta:
        model = SavedPrompt
        fields = ["id", "title", "text", "variables", "group", "owner", "mine"]
        fields += ["created_at", "updated_at"]
        read_only_fields = ["id", "owner", "mine", "variables", "created_at", "updated_at"]
        # The service checks lengths, with messages that say by how much.
        extra_kwargs = {"title": {"max_length": None}}

    def get_mine(self, prompt: SavedPrompt) -> bool:
        return bool(prompt.owner_id == self.context["request"].user.pk)


def _saved(write: Any) -> SavedPrompt:
    """The service's refusal as DRF's 400, by field."""
    try:
        return write()  # type: ignore[no-any-return]
    except DjangoValidationError as refused:
        if hasattr(refused, "error_dict"):
            raise exceptions.ValidationError(refused.message_dict) from None
        raise exceptions.ValidationError({"detail": refused.messages}) from None


NOT_VISIBLE = OpenApiResponse(description="No such prompt of yours or your groups'.")
READ_ONLY = OpenApiResponse(description="Shared with you by a group: only its owner changes it.")


@extend_schema_view(
    get=extend_schema(
        summary="Your saved prompts and those shared with your groups, by title",
        responses={200: SavedPromptSerializer(many=True)},
    ),
    post=extend_schema(
        summary="Save a prompt",
        description="A title (up to 100 characters), a text (up to CHAT_MAX_PROMPT_CHARS) whose "
        "`{{name}}` variables are named with letters, digits and _, starting with a letter, "
        "and optionally one of your groups to share it with.",
        responses={201: SavedPromptSerializer, 400: OpenApiResponse(description="Refused.")},
    ),
)
class PromptList(generics.ListCreateAPIView[SavedPrompt]):
    serializer_class = SavedPromptSerializer

    def get_queryset(self) -> SavedPromptQuerySet:
        return SavedPrompt.objects.visible_to(self.request.user).select_related("owner")

    def perform_create(self, serializer: serializers.BaseSerializer[SavedPrompt]) -> None:
        owner: User = self.request.user  # type: ignore[assignment]  # IsAuthenticated
        data = serializer.validated_data
        serializer.instance = _saved(
            lambda: prompt_create(
                owner=owner, title=data["title"], text=data["text"], group=data.get("group")
            )
        )


@extend_schema_view(
    get=extend_schema(
        summary="One saved prompt, yours or shared with your groups",
        responses={200: SavedPromptSerializer, 404: NOT_VISIBLE},
    ),
    patch=extend_schema(
        summary="Change one of your prompts",
        responses={
            200: SavedPromptSerializer,
            400: OpenApiResponse(description="Refused."),
            403: READ_ONLY,
            404: NOT_VISIBLE,
        },
    ),
    delete=extend_schema(
        summary="Delete one of your prompts",
        responses={204: None, 403: READ_ONLY, 404: NOT_VISIBLE},
    ),
)
class PromptDetail(generics.RetrieveUpdateDestroyAPIView[SavedPrompt]):
    serializer_class = SavedPromptSerializer
    lookup_url_kwarg = "prompt_id"
    http_method_names = ["get", "patch", "delete", "head", "options"]

    def get_queryset(self) -> SavedPromptQuerySet:
        return SavedPrompt.objects.visible_to(self.request.user).select_related("owner")

    def get_object(self) -> SavedPrompt:
        prompt = super().get_object()
        writing = self.request.method not in ("GET", "HEAD", "OPTIONS")
        if writing and prompt.owner_id != self.request.user.pk:
            raise exceptions.PermissionDenied("Shared with you: only its owner changes it.")
        return prompt

    def perform_update(self, serializer: serializers.BaseSerializer[SavedPrompt]) -> None:
        prompt = serializer.instance
        assert prompt is not None
        data = serializer.validated_data
        serializer.instance = _saved(
            lambda: prompt_update(
                prompt=prompt,
                title=data.get("title", prompt.title),
                text=data.get("text", prompt.text),
                group=data.get("group", prompt.group),
            )
        )

    def perform_destroy(self, instance: SavedPrompt) -> None:
        prompt_delete(prompt=instance)

"""REST endpoints over the caller's own conversations: list, read, change, delete. Anyone
else's answer 404."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import transaction
from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import exceptions, generics
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request
from rest_framework.response import Response

from conversations import search
from conversations.api import exports
from conversations.api.serializers import (
    ConversationChangeSerializer,
    ConversationDetailSerializer,
    ConversationFilterSerializer,
    ConversationSummarySerializer,
)
from conversations.models import Conversation, ConversationQuerySet, Project
from conversations.services.conversations import (
    conversation_configure,
    conversation_delete,
    conversation_rename,
)
from conversations.services.projects import (
    conversation_archive,
    conversation_move,
    conversation_pin,
)


class ConversationPagination(PageNumberPagination):
    page_size = 20
    page_size_query_param = "page_size"
    max_page_size = 100


def filtered(request: Request) -> ConversationQuerySet:
    """The caller's conversations narrowed by ?q=, ?since= and ?until=, in no order yet."""
    filters = ConversationFilterSerializer(data=request.query_params)
    filters.is_valid(raise_exception=True)
    params = filters.validated_data
    mine = Conversation.objects.visible_to(request.user)
    try:
        matching = search.filter_matching(mine, params.get("q", ""))
    except search.FilterError as exc:
        raise exceptions.ValidationError({"q": [str(exc)]}) from None
    return matching.in_range(params.get("since"), params.get("until"))


NOT_YOURS = OpenApiResponse(description="No such conversation of yours.")
BAD_QUERY = OpenApiResponse(
    description="A filter that is not valid, such as a malformed date or `pinned:maybe` in q."
)


@extend_schema(
    summary="List your conversations, newest first",
    parameters=[ConversationFilterSerializer],
    responses={
        200: ConversationSummarySerializer(many=True),
        400: BAD_QUERY,
        404: OpenApiResponse(description="No such page."),
    },
)
class ConversationList(generics.ListAPIView[Conversation]):
    serializer_class = ConversationSummarySerializer
    pagination_class = ConversationPagination

    def get_queryset(self) -> ConversationQuerySet:
        conversations = filtered(self.request).newest_first()
        return conversations.select_related("owner", "project").with_stats()


@extend_schema_view(
    get=extend_schema(
        summary="One conversation with its messages",
        responses={200: ConversationDetailSerializer, 404: NOT_YOURS},
    ),
    patch=extend_schema(
        summary="Rename it, change its model, system prompt or sampling for the next replies, "
        "or pin, archive or move it",
        description="Each value is checked against the bounds of the model the conversation "
        "will have (see /api/models/); null resets a setting to the model's default.",
        request=ConversationChangeSerializer,
        responses={
            200: ConversationDetailSerializer,
            400: OpenApiResponse(
                description="A value out of the model's bounds, or no such model."
            ),
            404: NOT_YOURS,
        },
    ),
    delete=extend_schema(
        summary="Delete a conversation and its messages for good",
        responses={204: None, 404: NOT_YOURS},
    ),
)
class ConversationDetail(generics.RetrieveUpdateDestroyAPIView[Conversation]):
    serializer_class = ConversationDetailSerializer
    lookup_url_kwarg = "conversation_id"
    http_method_names = ["get", "patch", "delete", "head", "options"]

    def get_queryset(self) -> QuerySet[Conversation]:
        return exports.with_messages(Conversation.objects.visible_to(self.request.user))

    @transaction.atomic  # a refused value changes nothing, not even the values before it
    def partial_update(self, request: Request, *args: object, **kwargs: object) -> Response:
        conversation = self.get_object()
        incoming = ConversationChangeSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        changes = dict(incoming.validated_data)
        title = changes.pop("title", None)
        organising = {name: changes.pop(name) for name in ORGANISING if name in changes}
        if "model" in changes:
            changes["model_slug"] = changes.pop("model")
        try:
            if changes:
                conversation_configure(
                    conversation=conversation, user=request.user, changes=changes
                )
        except DjangoValidationError as exc:
            raise exceptions.ValidationError(
                {_API_NAMES.get(name, name): errors for name, errors in exc.message_dict.items()}
            ) from None
        if title is not None:
            conversation_rename(conversation=conversation, title=title)
        organise(conversation, request, organising)
        return Response(self.get_serializer(self.get_object()).data)

    def perform_destroy(self, instance: Conversation) -> None:
        conversation_delete(conversation=instance)


_API_NAMES = {"model_slug": "model"}  # the service's field names as the API spells them

ORGANISING = ("pinned", "archived", "project")


def organise(conversation: Conversation, request: Request, changes: dict[str, Any]) -> None:
    """Pin, archive or move it as PATCH asked; a project not the caller's is refused (400)."""
    if "project" in changes:
        wanted = changes["project"]
        project = None
        if wanted is not None:
            project = Project.objects.owned_by(request.user).filter(pk=wanted).first()
            if project is None:
                raise exceptions.ValidationError({"project": ["No such project of yours."]})
        conversation_move(conversation=conversation, project=project)
    if "pinned" in changes:
        conversation_pin(conversation=conversation, pinned=changes["pinned"])
    if "archived" in changes:
        conversation_archive(conversation=conversation, archived=changes["archived"])

"""REST endpoints over the caller's own conversations; anyone else's answer 404."""

from __future__ import annotations

from collections.abc import AsyncIterator, Generator, Iterable, Iterator

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.db.models import QuerySet
from django.http import HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
)
from rest_framework import exceptions, generics
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.pagination import PageNumberPagination
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.views import APIView

from conversations.api import exports
from conversations.api.serializers import (
    ConversationDetailSerializer,
    ConversationFilterSerializer,
    ConversationSummarySerializer,
)
from conversations.models import Conversation, ConversationQuerySet
from conversations.services.conversations import conversation_delete
from conversations.types import ConversationId


class ConversationPagination(PageNumberPagination):
    page_size = 20
    page_size_query_param = "page_size"
    max_page_size = 100


def filtered(request: Request) -> ConversationQuerySet:
    """The caller's conversations narrowed by ?q=, ?since= and ?until=, newest first."""
    filters = ConversationFilterSerializer(data=request.query_params)
    filters.is_valid(raise_exception=True)
    params = filters.validated_data
    return (
        Conversation.objects.visible_to(request.user)
        .search(params.get("q", ""))
        .in_range(params.get("since"), params.get("until"))
        .newest_first()
    )


NOT_YOURS = OpenApiResponse(description="No such conversation of yours.")
BAD_QUERY = OpenApiResponse(description="A filter that is not valid, such as a malformed date.")


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
        return filtered(self.request).select_related("owner").with_stats()


@extend_schema_view(
    get=extend_schema(
        summary="One conversation with its messages",
        responses={200: ConversationDetailSerializer, 404: NOT_YOURS},
    ),
    delete=extend_schema(
        summary="Delete a conversation and its messages for good",
        responses={204: None, 404: NOT_YOURS},
    ),
)
class ConversationDetail(generics.RetrieveDestroyAPIView[Conversation]):
    serializer_class = ConversationDetailSerializer
    lookup_url_kwarg = "conversation_id"

    def get_queryset(self) -> QuerySet[Conversation]:
        return exports.with_messages(Conversation.objects.visible_to(self.request.user))

    def perform_destroy(self, instance: Conversation) -> None:
        conversation_delete(conversation=instance)


EXPORT_FORMAT = OpenApiParameter(
    "format", OpenApiTypes.STR, enum=list(exports.FORMATS), default="json", description="File type."
)


class FileTypeNegotiation(DefaultContentNegotiation):
    """Here `?format=` names the file to download, not a DRF renderer: errors are always JSON."""

    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        renderer = next(iter(renderers))
        return renderer, renderer.media_type


class ConversationExport(APIView):
    content_negotiation_class = FileTypeNegotiation

    @extend_schema(
        parameters=[EXPORT_FORMAT],
        responses={
            (200, "application/json"): ConversationDetailSerializer,
            (200, "text/markdown"): OpenApiTypes.STR,
            (200, "text/plain"): OpenApiTypes.STR,
            400: OpenApiResponse(description="Unknown format."),
            404: NOT_YOURS,
        },
        summary="Download one transcript, as a file named after its title",
    )
    def get(self, request: Request, conversation_id: ConversationId) -> HttpResponse:
        fmt = request.query_params.get("format", "json")
        if fmt not in exports.FORMATS:
            raise exceptions.ValidationError(
                {"format": f"Choose one of {', '.join(exports.FORMATS)}."}
            )
        conversation = get_object_or_404(
            exports.with_messages(Conversation.objects.visible_to(request.user)), pk=conversation_id
        )
        body = exports.render([conversation], fmt, many=False)
        return exports.download(body, fmt, stem=str(conversation))


class JsonlExport(APIView):
    @extend_schema(
        operation_id="conversations_export_jsonl",
        tags=["conversations"],
        summary="Download all your conversations, one JSON object a line",
        description="Streamed: the server holds one batch of conversations at a time.",
        parameters=[ConversationFilterSerializer],
        responses={(200, exports.JSONL_CONTENT_TYPE): OpenApiTypes.STR, 400: BAD_QUERY},
    )
    def get(self, request: Request) -> StreamingHttpResponse:
        lines = exports.iter_jsonl(filtered(request))
        content: Iterator[bytes] | AsyncIterator[bytes] = lines
        if isinstance(request._request, ASGIRequest):
            # Under ASGI Django would drain a plain iterator into memory before sending it.
            content = _in_worker_thread(lines)
        return StreamingHttpResponse(
            content,
            content_type=exports.JSONL_CONTENT_TYPE,
            headers={"Content-Disposition": 'attachment; filename="conversations.jsonl"'},
        )


async def _in_worker_thread(lines: Generator[bytes, None, None]) -> AsyncIterator[bytes]:
    """Pull a blocking iterator from the request's sync thread, where its database cursor lives."""
    pull = sync_to_async(lambda: next(lines, None), thread_sensitive=True)
    try:
        while (chunk := await pull()) is not None:
            yield chunk
    finally:
        # A client that leaves mid-download must not leave the server-side cursor open.
        await sync_to_async(lines.close, thread_sensitive=True)()

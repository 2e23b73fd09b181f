"""The export endpoints: one transcript as a file, and every conversation as JSONL pages
(exports.py renders them)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast

from django.conf import settings
from django.http import HttpResponse
from django.http.response import HttpResponseBase
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.utils.urls import replace_query_param
from rest_framework.views import APIView

from conversations.api import archives, cursors, exports
from conversations.api.conversations import NOT_YOURS, filtered
from conversations.api.serializers import ConversationDetailSerializer, ConversationFilterSerializer
from conversations.models import Conversation
from conversations.services import audit
from conversations.services.conversations import conversation_or_404
from conversations.types import ConversationId, User

EXPORT_FORMAT = OpenApiParameter(
    "format",
    OpenApiTypes.STR,
    enum=[*exports.FORMATS, archives.ARCHIVE],
    default="json",
    description="File type: zip holds the JSON export and the files attached to its messages.",
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
            (200, "application/zip"): OpenApiTypes.BINARY,
            400: OpenApiResponse(description="Unknown format."),
            404: NOT_YOURS,
        },
        summary="Download one transcript, as a file named after its title",
    )
    def get(self, request: Request, conversation_id: ConversationId) -> HttpResponseBase:
        fmt = request.query_params.get("format", "json")
        if fmt not in exports.FORMATS and fmt != archives.ARCHIVE:
            raise exceptions.ValidationError(
                {"format": f"Choose one of {', '.join([*exports.FORMATS, archives.ARCHIVE])}."}
            )
        conversation = conversation_or_404(
            user=request.user,
            conversation_id=conversation_id,
            queryset=exports.with_messages(Conversation.objects.all()),
        )
        audit.record(
            audit.Event.EXPORT,
            subject=cast(User, request.user),
            conversation=conversation,
            format=fmt,
        )
        if fmt == archives.ARCHIVE:
            return archives.download_zip(archives.to_zip(conversation), stem=str(conversation))
        body = exports.render([conversation], fmt, many=False)
        return exports.download(body, fmt, stem=str(conversation))


EXPORT_CURSOR = OpenApiParameter(
    "cursor",
    OpenApiTypes.STR,
    description="Where the page starts: copy it from the previous page's `Link` header, as it is.",
)
NEXT_PAGE = OpenApiParameter(
    "Link",
    OpenApiTypes.STR,
    location=OpenApiParameter.HEADER,
    response=[200],
    description='`<url>; rel="next"` (RFC 8288) while more conversations remain: the next '
    "page's absolute URL, with your filters and a cursor. Absent on the last page.",
)


class JsonlExport(APIView):
    @extend_schema(
        operation_id="conversations_export_jsonl",
        tags=["conversations"],
        summary="Download your conversations, one JSON object a line, a page at a time",
        description=(
            "Oldest created first, a page at a time: a response holds up to about "
            "CHAT_EXPORT_PAGE_BYTES of conversations (4 MiB by default), and at least one. While "
            'more remain it carries `Link: <url>; rel="next"`; follow it until a response comes '
            "without one. That URL repeats your `q`/`since`/`until` filters and adds an opaque, "
            "signed `cursor`. Paging is stable: conversations created meanwhile come at the end, "
            "and one that gets new messages meanwhile is neither repeated nor skipped."
        ),
        parameters=[ConversationFilterSerializer, EXPORT_CURSOR, NEXT_PAGE],
        responses={
            (200, exports.JSONL_CONTENT_TYPE): OpenApiTypes.STR,
            400: OpenApiResponse(
                description="A filter that is not valid, or a cursor this server did not issue."
            ),
        },
    )
    def get(self, request: Request) -> HttpResponse:
        # Bounded pages, not one streamed response: daphne's send() never waits for the client,
        # so a slow reader of a stream made the server buffer the whole history in memory.
        # The keyset is (created_at, pk), never updated_at, which moves as conversations go on.
        conversations = filtered(request).oldest_created_first()
        conversations = cursors.after(conversations, request.query_params.get("cursor", ""))
        page = exports.jsonl_page(conversations, max_bytes=settings.CHAT_EXPORT_PAGE_BYTES)
        # A row a page: each is a download of its own, and a history's first page is its start.
        audit.record(
            audit.Event.EXPORT,
            subject=cast(User, request.user),
            format="jsonl",
            first_page="cursor" not in request.query_params,
            filters={k: v for k, v in request.query_params.items() if k in ("q", "since", "until")},
        )
        response = HttpResponse(
            page.body,
            content_type=exports.JSONL_CONTENT_TYPE,
            headers={"Content-Disposition": 'attachment; filename="conversations.jsonl"'},
        )
        if page.last is not None:
            cursor = cursors.cursor_after(page.last)
            next_url = replace_query_param(request.build_absolute_uri(), "cursor", cursor)
            response.headers["Link"] = f'<{next_url}>; rel="next"'
        return response

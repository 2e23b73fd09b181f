"""REST endpoints over the caller's own conversations; anyone else's answer 404."""

from __future__ import annotations

from collections.abc import Iterable

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import QuerySet
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
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
from rest_framework.response import Response
from rest_framework.utils.urls import replace_query_param
from rest_framework.views import APIView

from conversations import engines, search
from conversations.api import cursors, exports
from conversations.api.serializers import (
    ChatModelSerializer,
    ConversationChangeSerializer,
    ConversationDetailSerializer,
    ConversationFilterSerializer,
    ConversationSummarySerializer,
    ShareLinkCreatedSerializer,
    ShareLinkSerializer,
)
from conversations.engines import catalogue, specs
from conversations.models import Conversation, ConversationQuerySet, ShareLink
from conversations.services.conversations import (
    conversation_configure,
    conversation_delete,
    conversation_rename,
)
from conversations.services.shares import share_create, share_revoke
from conversations.types import ConversationId


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
    return search.filter_matching(mine, params.get("q", "")).in_range(
        params.get("since"), params.get("until")
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
        return filtered(self.request).newest_first().select_related("owner").with_stats()


@extend_schema_view(
    get=extend_schema(
        summary="One conversation with its messages",
        responses={200: ConversationDetailSerializer, 404: NOT_YOURS},
    ),
    patch=extend_schema(
        summary="Rename it, or change its model, system prompt or sampling for the next replies",
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

    def partial_update(self, request: Request, *args: object, **kwargs: object) -> Response:
        conversation = self.get_object()
        incoming = ConversationChangeSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        changes = dict(incoming.validated_data)
        title = changes.pop("title", None)
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
        return Response(self.get_serializer(self.get_object()).data)

    def perform_destroy(self, instance: Conversation) -> None:
        conversation_delete(conversation=instance)


_API_NAMES = {"model_slug": "model"}  # the service's field names as the API spells them

_STATUS = {"ready": "ready", "loading": "loading", "failed": "unavailable", "idle": "not_loaded"}


@extend_schema(
    summary="The models you may chat with, the default first",
    responses={200: ChatModelSerializer(many=True)},
)
class ModelList(APIView):
    def get(self, request: Request) -> Response:
        models = [
            {**_model_fields(spec), "status": _STATUS[engines.load_state(spec)]}
            for spec in catalogue.models_for(request.user)
        ]
        return Response(ChatModelSerializer(models, many=True).data)


def _model_fields(spec: specs.ModelSpec) -> dict[str, object]:
    return {name: getattr(spec, name) for name in _SPEC_FIELDS}


_SPEC_FIELDS = (
    "slug",
    "name",
    "backend",
    "context_tokens",
    "system_prompt",
    "temperature",
    "max_tokens",
    "max_temperature",
    "max_tokens_limit",
)


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


@extend_schema_view(
    get=extend_schema(
        summary="The share links of one of your conversations, newest first",
        description="Revoked links stay listed, with `revoked_at`. A link's URL is not stored: "
        "it is shown only in the answer that creates it.",
        responses={200: ShareLinkSerializer(many=True), 404: NOT_YOURS},
    ),
    post=extend_schema(
        summary="Make a read-only link to the conversation as it is now",
        description="The link shows a snapshot: the title and the messages of the branch shown "
        "at this moment, to anyone who has it (signed in, where CHAT_SHARES_REQUIRE_LOGIN is "
        "set). Later messages are not shown. The answer holds the link's `url`, once.",
        request=None,
        responses={201: ShareLinkCreatedSerializer, 404: NOT_YOURS},
    ),
)
class ConversationShares(APIView):
    def get(self, request: Request, conversation_id: ConversationId) -> Response:
        conversation = get_object_or_404(
            Conversation.objects.visible_to(request.user), pk=conversation_id
        )
        shares = ShareLink.objects.owned_by(request.user).filter(conversation=conversation)
        return Response(ShareLinkSerializer(shares, many=True).data)

    def post(self, request: Request, conversation_id: ConversationId) -> Response:
        conversation = get_object_or_404(
            Conversation.objects.visible_to(request.user), pk=conversation_id
        )
        # Its owner is the caller (visible_to), typed as a signed-in user.
        share, token = share_create(conversation=conversation, created_by=conversation.owner)
        url = request.build_absolute_uri(reverse("share-view", kwargs={"token": token}))
        return Response(ShareLinkCreatedSerializer(share, context={"url": url}).data, status=201)


class ConversationShareDetail(APIView):
    @extend_schema(
        summary="Revoke a share link: from now on it answers 404",
        description="Revoking a revoked link changes nothing and answers 204 again.",
        responses={
            204: None,
            404: OpenApiResponse(description="No such link to a conversation of yours."),
        },
    )
    def delete(self, request: Request, conversation_id: ConversationId, share_id: int) -> Response:
        share = get_object_or_404(
            ShareLink.objects.owned_by(request.user).filter(conversation_id=conversation_id),
            pk=share_id,
        )
        share_revoke(share=share)
        return Response(status=204)

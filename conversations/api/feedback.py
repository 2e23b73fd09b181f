"""GET /api/feedback.jsonl: the caller's rated replies, one evaluation record a line, a page at a
time (as /api/export.jsonl pages conversations)."""

from __future__ import annotations

import json
from typing import cast

from django.core import signing
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.utils.encoders import JSONEncoder
from rest_framework.utils.urls import replace_query_param
from rest_framework.views import APIView

from conversations.api.exports import JSONL_CONTENT_TYPE
from conversations.models import Feedback
from conversations.services import audit
from conversations.services.feedback import evaluation_record
from conversations.types import User

# Records a page: each reads its reply's branch (a query or two), so a page stays quick.
PAGE_SIZE = 100
# No timestamp: the same page always has the same URL. Its own salt: an export.jsonl cursor
# is not one of these.
_SIGNER = signing.Signer(salt="conversations.api.feedback-cursor")
INVALID_CURSOR = (
    "Not a cursor from this server: follow the previous page's Link header, "
    "or start again without one."
)


def _after(cursor: str) -> int:
    """The last rating's id the previous page held; 0 for the first page."""
    if not cursor:
        return 0
    try:
        return int(_SIGNER.unsign(cursor))
    except (signing.BadSignature, ValueError):
        raise exceptions.ValidationError({"cursor": [INVALID_CURSOR]}) from None


class FeedbackExport(APIView):
    @extend_schema(
        operation_id="feedback_export_jsonl",
        tags=["feedback"],
        summary="Download your rated replies for evaluation, one JSON object a line",
        description=(
            "Each line: `prompt` (the messages the model got before the reply: its system "
            "prompt, then the branch before it, attachments' text included), `reply`, "
            "`rating` (up or down), `reason`, `model` (the chat model's slug), `settings` (what "
            "the reply was generated with), `created_at`, `updated_at`, and the ids of the "
            "`message` and its `conversation`. Oldest rating first, up to 100 a response; while "
            'more remain the response carries `Link: <url>; rel="next"`.'
        ),
        parameters=[
            OpenApiParameter(
                "cursor",
                OpenApiTypes.STR,
                description="Where the page starts: copy it from the previous page's `Link` "
                "header, as it is.",
            )
        ],
        responses={
            (200, JSONL_CONTENT_TYPE): OpenApiTypes.STR,
            400: OpenApiResponse(description="A cursor this server did not issue."),
        },
    )
    def get(self, request: Request) -> HttpResponse:
        # The keyset is the rating's id: rating a reply again updates its row, never moves it.
        rows = list(
            Feedback.objects.of(request.user)
            .filter(pk__gt=_after(request.query_params.get("cursor", "")))
            .select_related("message")
            .order_by("pk")[: PAGE_SIZE + 1]
        )
        page, more = rows[:PAGE_SIZE], len(rows) > PAGE_SIZE
        audit.record(
            audit.Event.EXPORT,
            subject=cast(User, request.user),
            format="feedback.jsonl",
            first_page="cursor" not in request.query_params,
        )
        body = "".join(
            json.dumps(evaluation_record(feedback), cls=JSONEncoder, ensure_ascii=False) + "\n"
            for feedback in page
        )
        response = HttpResponse(
            body.encode(),
            content_type=JSONL_CONTENT_TYPE,
            headers={"Content-Disposition": 'attachment; filename="feedback.jsonl"'},
        )
        if more:
            cursor = _SIGNER.sign(str(page[-1].pk))
            next_url = replace_query_param(request.build_absolute_uri(), "cursor", cursor)
            response.headers["Link"] = f'<{next_url}>; rel="next"'
        return response

"""POST /api/imports/: import an export (ChatGPT, Claude, Open WebUI, chatsite) into your history."""

from __future__ import annotations

from typing import Any, cast

from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import exceptions, serializers
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from conversations.imports import FORMATS
from conversations.imports.departure import client_left
from conversations.imports.importer import ImportedConversation, check_request_size
from conversations.imports.slots import ImportBusy
from conversations.imports.source import ImportLimited, ImportRefused
from conversations.imports.uploads import import_upload
from conversations.types import User

ERROR_CODES = [
    "too_large",
    "not_json",
    "bad_zip",
    "zip_bomb",
    "wrong_shape",
    "unknown_format",
    "bad_format",
    "empty",
    "too_deep",
    "bad_conversation",
    "conversation_too_large",
    "too_many_conversations",
    "no_file",
    "too_many_imports",
    "import_in_progress",
    "imports_busy",
]


@extend_schema_field(OpenApiTypes.BINARY)
class UploadField(serializers.FileField):
    """A file sent in the multipart body (the schema's default shows a file as a URL)."""


class ImportRequestSerializer(serializers.Serializer[dict[str, Any]]):
    file = UploadField(
        allow_empty_file=True,  # refused by the import, with its own words
        help_text="The export: ChatGPT's or Claude's zip (or its conversations.json), Open "
        "WebUI's JSON, or chatsite's JSON or JSONL.",
    )
    format = serializers.ChoiceField(
        choices=list(FORMATS),
        required=False,
        allow_blank=True,
        help_text="The file's format; omitted or empty: detected from its first conversation.",
    )
    keep_partial = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Import the conversations that can be, skipping the others (with the reason) "
        "and keeping what came before a point where the file breaks. Without it, one "
        "conversation that cannot be imported imports nothing.",
    )


class ImportedSerializer(serializers.Serializer[ImportedConversation]):
    id = serializers.UUIDField(help_text="The conversation's id here.")
    title = serializers.CharField()
    messages = serializers.IntegerField(help_text="Messages imported, every version included.")
    url = serializers.SerializerMethodField(help_text="Its page.")

    def get_url(self, imported: ImportedConversation) -> str:
        return reverse("conversation-detail", kwargs={"conversation_id": imported.id})


class SkippedSerializer(serializers.Serializer[Any]):
    title = serializers.CharField()
    external_id = serializers.CharField(help_text="Its id in the source; empty if unknown.")
    reason = serializers.CharField()
    messages = serializers.IntegerField(
        allow_null=True,
        help_text="How many of its messages were left out (the conversation was imported); "
        "null: the whole conversation was skipped.",
    )


class ImportReportSerializer(serializers.Serializer[Any]):
    format = serializers.ChoiceField(choices=list(FORMATS))
    imported = ImportedSerializer(many=True)
    skipped = SkippedSerializer(many=True)
    stopped = serializers.CharField(
        help_text="With keep_partial: why the rest of the file was not read; empty if it was."
    )


class ImportErrorSerializer(serializers.Serializer[Any]):
    code = serializers.ChoiceField(choices=ERROR_CODES)
    detail = serializers.CharField(help_text="What is wrong, in words for people.")


class UploadTooLarge(exceptions.APIException):
    status_code = 413


def refused(exc: ImportRefused) -> Response:
    body = {"code": exc.code, "detail": exc.message}
    if isinstance(exc, ImportLimited | ImportBusy):
        return Response(body, status=429, headers={"Retry-After": str(exc.retry_after)})
    return Response(body, status=413 if exc.code == "too_large" else 400)


class ImportCreate(APIView):
    parser_classes = [MultiPartParser]

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        # Before authentication: a session's CSRF check parses the body, file and all.
        try:
            check_request_size(request.META)
        except ImportRefused as exc:
            raise UploadTooLarge({"code": exc.code, "detail": exc.message}) from None
        super().initial(request, *args, **kwargs)

    @extend_schema(
        operation_id="imports_create",
        summary="Import conversations from an export file",
        description="Formats: ChatGPT's data export (the zip, or its conversations.json; "
        "every branch kept), Claude's (the zip or conversations.json), Open WebUI's chat "
        "export (JSON), and chatsite's own (a conversation's JSON export, or export.jsonl). "
        "Imported conversations are yours only, marked as imported, with their original "
        "times. A conversation imported before (same format, same id in the source) is "
        "skipped, so a file can be imported again. The file is read a conversation at a "
        "time; its size is limited by CHAT_IMPORT_MAX_BYTES.",
        request={"multipart/form-data": ImportRequestSerializer},
        responses={
            201: ImportReportSerializer,
            400: OpenApiResponse(
                ImportErrorSerializer, description="The file cannot be imported; nothing was."
            ),
            413: OpenApiResponse(ImportErrorSerializer, description="The file is too large."),
            429: OpenApiResponse(
                ImportErrorSerializer,
                description="Over CHAT_IMPORTS_PER_HOUR (too_many_imports), another import of "
                "yours still running (import_in_progress), or the server running "
                "CHAT_IMPORTS_AT_ONCE imports (imports_busy); nothing was read. Retry-After "
                "says when to try again.",
            ),
        },
    )
    def post(self, request: Request) -> Response:
        incoming = ImportRequestSerializer(data=request.data)
        if not incoming.is_valid():
            errors = incoming.errors
            field = next(iter(errors))
            code = "no_file" if field == "file" else "bad_format"
            detail = f"{field}: {' '.join(str(e) for e in errors[field])}"
            return Response({"code": code, "detail": detail}, status=400)
        params = incoming.validated_data
        try:
            report = import_upload(
                owner=cast(User, request.user),  # signed in: IsAuthenticated
                upload=params["file"],
                fmt=params.get("format") or None,
                keep_partial=params["keep_partial"],
                client_left=client_left(request),
            )
        except ImportRefused as exc:
            return refused(exc)
        return Response(ImportReportSerializer(report).data, status=201)

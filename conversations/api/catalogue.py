"""GET /api/models/: the models the caller may chat with, and how each one's engine stands."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from conversations import engines
from conversations.api.serializers import ChatModelSerializer
from conversations.engines import catalogue, specs

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

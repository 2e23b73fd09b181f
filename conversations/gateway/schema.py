"""The gateway's part of the OpenAPI schema (/api/schema/, the docs page).

Its views are async Django views, not DRF's, so drf-spectacular cannot see them; this
postprocessing hook (SPECTACULAR_SETTINGS) adds their operations, written out by hand here, and
the bodies they take and give (gateway.schema_components), from what gateway.wire accepts and
gateway.sse writes. tests/gateway/test_schema.py holds them to that: the live server's answers
must validate against these schemas.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from conversations.gateway import schema_responses
from conversations.gateway.endpoints import CONVERSATION_HEADER
from conversations.gateway.schema_components import COMPONENTS, ref

TAG = "gateway"
SECURITY: list[dict[str, list[str]]] = [{"bearerAuth": []}]


def _error(description: str, **headers: str) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "description": description,
        "content": {"application/json": {"schema": ref("GatewayError")}},
    }
    if headers:
        answer["headers"] = {
            name: {"schema": {"type": "string"}, "description": text}
            for name, text in headers.items()
        }
    return answer


_UNAUTHENTICATED = _error(
    "No API token, or one that is invalid or revoked (code `invalid_api_key`); revoked while "
    "the reply was written (code `token_revoked`)."
)
_HOUSEKEEPING = (
    [
        {
            "name": settings.CHAT_GATEWAY_HOUSEKEEPING_HEADER,
            "in": "header",
            "required": False,
            "schema": {"type": "string"},
            "description": "Any value: the call is the client's own housekeeping (a title or "
            "tag request), answered and not recorded.",
        }
    ]
    if settings.CHAT_GATEWAY_HOUSEKEEPING_HEADER
    else []
)
_CONVERSATION = {
    CONVERSATION_HEADER: {
        "schema": {"type": "string", "format": "uuid"},
        "description": "The conversation this call was saved in.",
    },
    "x-request-id": {
        "schema": {"type": "string"},
        "description": "The reply's request id, as the server's log lines name it (every "
        "response under /v1 has one).",
    },
}

PATHS: dict[str, Any] = {
    "/v1/chat/completions": {
        "post": {
            "operationId": "gateway_chat_completions_create",
            "summary": "Chat with a model (OpenAI-compatible), streamed or not",
            "description": "Saved in a conversation of yours (origin api) unless the server or "
            "the token records no calls: a new one, or the one of this token's whose branch the "
            "history goes on from (the whole chat sent each turn is one conversation). The chat "
            "page shows it streaming and can stop it. Closing a stream stops the model. The "
            "same per-user limits as the chat page apply.",
            "tags": [TAG],
            "security": SECURITY,
            "parameters": [
                {
                    "name": CONVERSATION_HEADER,
                    "in": "header",
                    "required": False,
                    "schema": {"type": "string", "format": "uuid"},
                    "description": "Go on in this conversation of yours: the stored "
                    "conversation is the history, and only the last message is added.",
                },
                *_HOUSEKEEPING,
            ],
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": ref("GatewayChatCompletionRequest")}},
            },
            "responses": {
                "200": {
                    "description": "The reply. With stream: server-sent events, each "
                    "`data: <GatewayChatCompletionChunk>`, then `data: [DONE]`; a failure "
                    "after the first chunk is one `data: <GatewayError>` and the end.",
                    "headers": _CONVERSATION,
                    "content": {
                        "application/json": {"schema": ref("GatewayChatCompletion")},
                        "text/event-stream": {"schema": ref("GatewayStreamEvent")},
                    },
                },
                "400": _error("A parameter that is not valid or not supported (see param)."),
                "401": _UNAUTHENTICATED,
                "404": _error("No such model, or no such conversation of yours."),
                "409": _error("A reply is still being written in that conversation."),
                "413": _error("The body is too large."),
                "429": _error(
                    "A per-user limit (type `requests`), or the user's token budget for the day "
                    "or the month used (type `tokens`, code `budget_exhausted`).",
                    **{
                        "Retry-After": "Seconds to wait before trying again (a budget: until it resets)."
                    },
                ),
                "502": _error(
                    "The model failed (code `engine_error`).",
                    **{"Retry-After": "Seconds to wait before trying again."},
                ),
                "503": _error(
                    "The model is not available (code `engine_unavailable`), or the server "
                    "stopped (code `interrupted`).",
                    **{"Retry-After": "Seconds to wait before trying again."},
                ),
            },
        }
    },
    "/v1/models": {
        "get": {
            "operationId": "gateway_models_list",
            "summary": "The models you may chat with (OpenAI-compatible), your default first",
            "tags": [TAG],
            "security": SECURITY,
            "responses": {
                "200": {
                    "description": "Your models.",
                    "content": {"application/json": {"schema": ref("GatewayModelList")}},
                },
                "401": _UNAUTHENTICATED,
            },
        }
    },
    "/v1/models/{model}": {
        "get": {
            "operationId": "gateway_models_retrieve",
            "summary": "One of your models (OpenAI-compatible)",
            "tags": [TAG],
            "security": SECURITY,
            "parameters": [
                {"name": "model", "in": "path", "required": True, "schema": {"type": "string"}}
            ],
            "responses": {
                "200": {
                    "description": "The model.",
                    "content": {"application/json": {"schema": ref("GatewayModel")}},
                },
                "401": _UNAUTHENTICATED,
                "404": _error("No such model of yours."),
            },
        }
    },
}


PATHS["/v1/responses"] = schema_responses.operation(PATHS["/v1/chat/completions"]["post"])


def add_gateway(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """drf-spectacular's postprocessing hook: the gateway's operations and components."""
    result.setdefault("paths", {}).update(PATHS)
    components = result.setdefault("components", {})
    components.setdefault("schemas", {}).update({**COMPONENTS, **schema_responses.COMPONENTS})
    components.setdefault("securitySchemes", {}).setdefault(
        "bearerAuth", {"type": "http", "scheme": "bearer"}
    )
    return result

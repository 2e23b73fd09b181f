"""The gateway's part of the OpenAPI schema (/api/schema/, the docs page).

Its views are async Django views, not DRF's, so drf-spectacular cannot see them; this
postprocessing hook (SPECTACULAR_SETTINGS) adds their operations, written out by hand from what
gateway.wire accepts and gateway.sse writes. tests/gateway/test_schema.py holds them to that: the
live server's answers must validate against these schemas.
"""

from __future__ import annotations

from typing import Any

from conversations.gateway.views import CONVERSATION_HEADER
from conversations.gateway.wire import MAX_MESSAGES, MAX_STOP_SEQUENCES

TAG = "gateway"
SECURITY: list[dict[str, list[str]]] = [{"bearerAuth": []}]


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {**schema, "nullable": True}


_TEXT_PART = {
    "type": "object",
    "properties": {"type": {"type": "string", "enum": ["text"]}, "text": {"type": "string"}},
    "required": ["type", "text"],
}

COMPONENTS: dict[str, Any] = {
    "GatewayMessage": {
        "type": "object",
        "properties": {
            "role": {"type": "string", "enum": ["system", "developer", "user", "assistant"]},
            "content": _nullable(
                {
                    "oneOf": [{"type": "string"}, {"type": "array", "items": _TEXT_PART}],
                    "description": "Text, or text parts (joined); null only for an assistant.",
                }
            ),
        },
        "required": ["role", "content"],
    },
    "GatewayChatCompletionRequest": {
        "type": "object",
        "description": "OpenAI's Chat Completions request. The last message must be the "
        "user's: the reply answers it. Unsupported parameters (n other than 1, tools, "
        "logprobs, penalties, logit_bias, non-text formats) are refused with a 400 naming them.",
        "properties": {
            "model": {"type": "string", "description": "A slug from GET /v1/models."},
            "messages": {
                "type": "array",
                "items": _ref("GatewayMessage"),
                "minItems": 1,
                "maxItems": MAX_MESSAGES,
            },
            "stream": _nullable({"type": "boolean", "default": False}),
            "stream_options": _nullable(
                {
                    "type": "object",
                    "properties": {"include_usage": {"type": "boolean"}},
                    "description": "Only with stream: include_usage adds a last chunk with "
                    "the usage.",
                }
            ),
            "max_completion_tokens": _nullable(
                {"type": "integer", "minimum": 1, "description": "Within the model's limit."}
            ),
            "max_tokens": _nullable(
                {"type": "integer", "minimum": 1, "description": "The older name."}
            ),
            "temperature": _nullable(
                {
                    "type": "number",
                    "minimum": 0,
                    "maximum": 2,
                    "description": "At most the model's max_temperature.",
                }
            ),
            "top_p": _nullable({"type": "number", "minimum": 0, "maximum": 1}),
            "stop": _nullable(
                {
                    "oneOf": [
                        {"type": "string"},
                        {
                            "type": "array",
                            "items": {"type": "string"},
                            "maxItems": MAX_STOP_SEQUENCES,
                        },
                    ]
                }
            ),
            "seed": _nullable({"type": "integer"}),
            "n": _nullable({"type": "integer", "enum": [1]}),
        },
        "required": ["model", "messages"],
    },
    "GatewayUsage": {
        "type": "object",
        "properties": {
            "prompt_tokens": {"type": "integer"},
            "completion_tokens": {"type": "integer"},
            "total_tokens": {"type": "integer"},
        },
        "required": ["prompt_tokens", "completion_tokens", "total_tokens"],
    },
    "GatewayChatCompletion": {
        "type": "object",
        "properties": {
            "id": {"type": "string", "description": "chatcmpl- and the reply's request id."},
            "object": {"type": "string", "enum": ["chat.completion"]},
            "created": {"type": "integer"},
            "model": {"type": "string"},
            "choices": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "index": {"type": "integer"},
                        "message": {
                            "type": "object",
                            "properties": {
                                "role": {"type": "string", "enum": ["assistant"]},
                                "content": {"type": "string"},
                                "refusal": _nullable({"type": "string"}),
                            },
                            "required": ["role", "content"],
                        },
                        "logprobs": _nullable({"type": "object"}),
                        "finish_reason": {
                            "type": "string",
                            "enum": ["stop", "length", "abort"],
                            "description": "abort: stopped (a Stop in the chat page).",
                        },
                    },
                    "required": ["index", "message", "finish_reason"],
                },
            },
            "usage": _ref("GatewayUsage"),
        },
        "required": ["id", "object", "created", "model", "choices", "usage"],
    },
    "GatewayChatCompletionChunk": {
        "type": "object",
        "description": "One `data:` event of a streamed reply.",
        "properties": {
            "id": {"type": "string"},
            "object": {"type": "string", "enum": ["chat.completion.chunk"]},
            "created": {"type": "integer"},
            "model": {"type": "string"},
            "choices": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "index": {"type": "integer"},
                        "delta": {
                            "type": "object",
                            "properties": {
                                "role": {"type": "string", "enum": ["assistant"]},
                                "content": {"type": "string"},
                            },
                        },
                        "logprobs": _nullable({"type": "object"}),
                        "finish_reason": _nullable(
                            {"type": "string", "enum": ["stop", "length", "abort"]}
                        ),
                    },
                    "required": ["index", "delta"],
                },
            },
            "usage": _nullable(_ref("GatewayUsage")),
        },
        "required": ["id", "object", "created", "model", "choices"],
    },
    "GatewayStreamEvent": {
        "type": "object",
        "description": "One server-sent event of a streamed reply: `data: <json>`.",
        "properties": {
            "data": {
                "anyOf": [
                    {
                        "type": "string",
                        "contentMediaType": "application/json",
                        "contentSchema": {
                            "anyOf": [_ref("GatewayChatCompletionChunk"), _ref("GatewayError")]
                        },
                        "description": "A chunk; or an error, and the stream ends there.",
                    },
                    {"type": "string", "enum": ["[DONE]"], "description": "The last event."},
                ]
            }
        },
        "required": ["data"],
    },
    "GatewayModel": {
        "type": "object",
        "properties": {
            "id": {"type": "string", "description": "The model's slug."},
            "object": {"type": "string", "enum": ["model"]},
            "created": {"type": "integer", "description": "Not known here: 0."},
            "owned_by": {"type": "string"},
            "name": {"type": "string"},
        },
        "required": ["id", "object", "created", "owned_by"],
    },
    "GatewayModelList": {
        "type": "object",
        "properties": {
            "object": {"type": "string", "enum": ["list"]},
            "data": {"type": "array", "items": _ref("GatewayModel")},
        },
        "required": ["object", "data"],
    },
    "GatewayError": {
        "type": "object",
        "properties": {
            "error": {
                "type": "object",
                "properties": {
                    "message": {"type": "string"},
                    "type": {"type": "string"},
                    "param": _nullable({"type": "string"}),
                    "code": _nullable({"type": "string"}),
                },
                "required": ["message", "type", "param", "code"],
            }
        },
        "required": ["error"],
    },
}


def _error(description: str, **headers: str) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "description": description,
        "content": {"application/json": {"schema": _ref("GatewayError")}},
    }
    if headers:
        answer["headers"] = {
            name: {"schema": {"type": "string"}, "description": text}
            for name, text in headers.items()
        }
    return answer


_UNAUTHENTICATED = _error("No API token, or one that is invalid or revoked.")
_CONVERSATION = {
    CONVERSATION_HEADER: {
        "schema": {"type": "string", "format": "uuid"},
        "description": "The conversation this call was saved in.",
    }
}

PATHS: dict[str, Any] = {
    "/v1/chat/completions": {
        "post": {
            "operationId": "gateway_chat_completions_create",
            "summary": "Chat with a model (OpenAI-compatible), streamed or not",
            "description": "Saved as a conversation of yours (origin api) unless the server "
            "records no calls; the chat page shows it streaming and can stop it. Closing a "
            "stream stops the model. The same per-user limits as the chat page apply.",
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
                }
            ],
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": _ref("GatewayChatCompletionRequest")}},
            },
            "responses": {
                "200": {
                    "description": "The reply. With stream: server-sent events, each "
                    "`data: <GatewayChatCompletionChunk>`, then `data: [DONE]`; a failure "
                    "after the first chunk is one `data: <GatewayError>` and the end.",
                    "headers": _CONVERSATION,
                    "content": {
                        "application/json": {"schema": _ref("GatewayChatCompletion")},
                        "text/event-stream": {"schema": _ref("GatewayStreamEvent")},
                    },
                },
                "400": _error("A parameter that is not valid or not supported (see param)."),
                "401": _UNAUTHENTICATED,
                "404": _error("No such model, or no such conversation of yours."),
                "409": _error("A reply is still being written in that conversation."),
                "413": _error("The body is too large."),
                "429": _error(
                    "A per-user limit.", **{"Retry-After": "Seconds to wait before trying again."}
                ),
                "500": _error("The model failed before it wrote anything."),
                "503": _error("The model is not available, or the server stopped."),
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
                    "content": {"application/json": {"schema": _ref("GatewayModelList")}},
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
                    "content": {"application/json": {"schema": _ref("GatewayModel")}},
                },
                "401": _UNAUTHENTICATED,
                "404": _error("No such model of yours."),
            },
        }
    },
}


def add_gateway(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """drf-spectacular's postprocessing hook: the gateway's operations and components."""
    result.setdefault("paths", {}).update(PATHS)
    components = result.setdefault("components", {})
    components.setdefault("schemas", {}).update(COMPONENTS)
    components.setdefault("securitySchemes", {}).setdefault(
        "bearerAuth", {"type": "http", "scheme": "bearer"}
    )
    return result

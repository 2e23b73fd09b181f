"""The gateway's request and response bodies as OpenAPI schemas: the components its operations
(gateway.schema) refer to, written out from what gateway.wire accepts and gateway.sse writes."""

from __future__ import annotations

from typing import Any

from conversations.gateway.messages import MAX_MESSAGES
from conversations.gateway.schema_tools import (
    FINISH_REASONS,
    OWN_REASON,
    TOOL_CALL,
    TOOL_CHOICE,
    TOOLS,
)
from conversations.gateway.wire import MAX_STOP_SEQUENCES


def ref(name: str) -> dict[str, str]:
    """A reference to one of COMPONENTS."""
    return {"$ref": f"#/components/schemas/{name}"}


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
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
            "role": {
                "type": "string",
                "enum": ["system", "developer", "user", "assistant", "tool"],
            },
            "content": nullable(
                {
                    "oneOf": [{"type": "string"}, {"type": "array", "items": _TEXT_PART}],
                    "description": "Text, or text parts (joined); null only for an assistant.",
                }
            ),
            "tool_calls": {
                "type": "array",
                "items": TOOL_CALL,
                "description": "An assistant message's calls of the tools.",
            },
            "tool_call_id": {
                "type": "string",
                "description": "A tool message: the call whose result it is.",
            },
        },
        "required": ["role", "content"],
    },
    "GatewayChatCompletionRequest": {
        "type": "object",
        "description": "OpenAI's Chat Completions request. The last message must be the "
        "user's, or tool messages answering the tool calls before them: the reply answers it. "
        "Unsupported parameters (n other than 1, logprobs, penalties, logit_bias, non-text "
        "formats) are refused with a 400 naming them.",
        "properties": {
            "model": {"type": "string", "description": "A slug from GET /v1/models."},
            "messages": {
                "type": "array",
                "items": ref("GatewayMessage"),
                "minItems": 1,
                "maxItems": MAX_MESSAGES,
            },
            "stream": nullable({"type": "boolean", "default": False}),
            "stream_options": nullable(
                {
                    "type": "object",
                    "properties": {"include_usage": {"type": "boolean"}},
                    "description": "Only with stream: include_usage adds a last chunk with "
                    "the usage.",
                }
            ),
            "max_completion_tokens": nullable(
                {"type": "integer", "minimum": 1, "description": "Within the model's limit."}
            ),
            "max_tokens": nullable(
                {"type": "integer", "minimum": 1, "description": "The older name."}
            ),
            "temperature": nullable(
                {
                    "type": "number",
                    "minimum": 0,
                    "maximum": 2,
                    "description": "At most the model's max_temperature.",
                }
            ),
            "top_p": nullable({"type": "number", "minimum": 0, "maximum": 1}),
            "stop": nullable(
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
            "seed": nullable({"type": "integer"}),
            "n": nullable({"type": "integer", "enum": [1]}),
            "tools": nullable(TOOLS),
            "tool_choice": nullable(TOOL_CHOICE),
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
                                "content": nullable(
                                    {"type": "string", "description": "null: tool calls only."}
                                ),
                                "refusal": nullable({"type": "string"}),
                                "tool_calls": {"type": "array", "items": TOOL_CALL},
                            },
                            "required": ["role", "content"],
                        },
                        "logprobs": nullable({"type": "object"}),
                        "finish_reason": {
                            "type": "string",
                            "enum": FINISH_REASONS,
                            "description": "stop too for a reply stopped from a tab (see "
                            "chatsite_finish_reason).",
                        },
                        "chatsite_finish_reason": OWN_REASON,
                    },
                    "required": ["index", "message", "finish_reason"],
                },
            },
            "usage": ref("GatewayUsage"),
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
                                "tool_calls": {
                                    "type": "array",
                                    "items": {
                                        **TOOL_CALL,
                                        "properties": {
                                            **TOOL_CALL["properties"],
                                            "index": {"type": "integer"},
                                        },
                                    },
                                    "description": "Each call whole, in one chunk before the last.",
                                },
                            },
                        },
                        "logprobs": nullable({"type": "object"}),
                        "finish_reason": nullable({"type": "string", "enum": FINISH_REASONS}),
                        "chatsite_finish_reason": OWN_REASON,
                    },
                    "required": ["index", "delta"],
                },
            },
            "usage": nullable(ref("GatewayUsage")),
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
                            "anyOf": [ref("GatewayChatCompletionChunk"), ref("GatewayError")]
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
            "data": {"type": "array", "items": ref("GatewayModel")},
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
                    "param": nullable({"type": "string"}),
                    "code": {"type": "string", "description": "Stable, snake_case."},
                },
                "required": ["message", "type", "param", "code"],
            }
        },
        "required": ["error"],
    },
}

"""/v1/responses in the OpenAPI schema (gateway.schema adds it): the request that
gateway.responses_wire reads and the response object it writes; its stream's events are
named in the operation's description."""

from __future__ import annotations

from typing import Any

from conversations.gateway.schema_components import nullable, ref
from conversations.gateway.schema_tools import OWN_REASON

_TEXT_PART = {
    "type": "object",
    "properties": {
        "type": {"type": "string", "enum": ["input_text", "output_text", "text"]},
        "text": {"type": "string"},
    },
    "required": ["type", "text"],
}

COMPONENTS: dict[str, Any] = {
    "GatewayResponseRequest": {
        "type": "object",
        "description": "OpenAI's Responses API request, for text. Tools, images and files, "
        "stored responses (previous_response_id, conversation), reasoning and structured "
        "output are refused with a 400 naming the field.",
        "properties": {
            "model": {"type": "string", "description": "A slug from GET /v1/models."},
            "input": {
                "oneOf": [
                    {"type": "string", "description": "The user's message."},
                    {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "type": {"type": "string", "enum": ["message"]},
                                "role": {
                                    "type": "string",
                                    "enum": ["user", "assistant", "system", "developer"],
                                },
                                "content": {
                                    "oneOf": [
                                        {"type": "string"},
                                        {"type": "array", "items": _TEXT_PART},
                                    ]
                                },
                            },
                            "required": ["role", "content"],
                        },
                    },
                ]
            },
            "instructions": nullable({"type": "string", "description": "The system prompt."}),
            "stream": nullable({"type": "boolean", "default": False}),
            "max_output_tokens": nullable({"type": "integer", "minimum": 1}),
            "temperature": nullable({"type": "number", "minimum": 0, "maximum": 2}),
            "top_p": nullable({"type": "number", "minimum": 0, "maximum": 1}),
        },
        "required": ["model", "input"],
    },
    "GatewayResponse": {
        "type": "object",
        "properties": {
            "id": {"type": "string", "description": "resp_ and the reply's request id."},
            "object": {"type": "string", "enum": ["response"]},
            "created_at": {"type": "integer"},
            "status": {"type": "string", "enum": ["completed", "incomplete", "in_progress"]},
            "model": {"type": "string"},
            "instructions": nullable({"type": "string"}),
            "output": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "type": {"type": "string", "enum": ["message"]},
                        "id": {"type": "string"},
                        "role": {"type": "string", "enum": ["assistant"]},
                        "status": {"type": "string"},
                        "content": {"type": "array", "items": _TEXT_PART},
                    },
                },
            },
            "incomplete_details": nullable(
                {
                    "type": "object",
                    "properties": {"reason": {"type": "string", "enum": ["max_output_tokens"]}},
                }
            ),
            "usage": nullable(
                {
                    "type": "object",
                    "properties": {
                        "input_tokens": {"type": "integer"},
                        "output_tokens": {"type": "integer"},
                        "total_tokens": {"type": "integer"},
                    },
                }
            ),
            "chatsite_finish_reason": OWN_REASON,
        },
        "required": ["id", "object", "created_at", "status", "model", "output"],
    },
}


def operation(common: dict[str, Any]) -> dict[str, Any]:
    """POST /v1/responses, with the responses it shares with /v1/chat/completions (`common`:
    its status codes' answers but the 200)."""
    return {
        "post": {
            "operationId": "gateway_responses_create",
            "summary": "A model's response to text (OpenAI's Responses API), streamed or not",
            "description": "The same call as /v1/chat/completions, recorded alike. Streamed: "
            "`event:`/`data:` pairs, response.created, response.in_progress, "
            "response.output_item.added, response.content_part.added, "
            "response.output_text.delta (each piece of text), response.output_text.done, "
            "response.content_part.done, response.output_item.done, then response.completed "
            "or response.incomplete; a failure after the first is an `error` event and the end.",
            **{key: common[key] for key in ("tags", "security", "parameters")},
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": ref("GatewayResponseRequest")}},
            },
            "responses": {
                **common["responses"],
                "200": {
                    **common["responses"]["200"],
                    "description": "The response; with stream, its events.",
                    "content": {
                        "application/json": {"schema": ref("GatewayResponse")},
                        "text/event-stream": {"schema": {"type": "string"}},
                    },
                },
            },
        }
    }

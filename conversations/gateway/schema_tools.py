"""The schemas of tool calling and of how a reply ends, shared by the gateway's components
(gateway.schema_components, gateway.schema_responses): what gateway.tools accepts and
gateway.sse writes."""

from __future__ import annotations

from typing import Any

from conversations.gateway.tools import MAX_TOOLS

TOOL_CALL: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "type": {"type": "string", "enum": ["function"]},
        "function": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"},
                "arguments": {"type": "string", "description": "JSON, as the model wrote it."},
            },
            "required": ["name", "arguments"],
        },
    },
    "required": ["id", "type", "function"],
}
FINISH_REASONS = ["stop", "length", "tool_calls"]
OWN_REASON = {
    "type": "string",
    "enum": ["cancelled"],
    "description": "chatsite's own: the reply was stopped (a Stop in the chat page).",
}

TOOLS: dict[str, Any] = {
    "type": "array",
    "maxItems": MAX_TOOLS,
    "items": {
        "type": "object",
        "properties": {
            "type": {"type": "string", "enum": ["function"]},
            "function": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "description": {"type": "string"},
                    "parameters": {"type": "object"},
                    "strict": {"type": "boolean"},
                },
                "required": ["name"],
            },
        },
        "required": ["type", "function"],
    },
    "description": "Passed on to a model with tools; another answers in text.",
}
TOOL_CHOICE: dict[str, Any] = {
    "oneOf": [
        {"type": "string", "enum": ["none", "auto", "required"]},
        {
            "type": "object",
            "properties": {
                "type": {"type": "string", "enum": ["function"]},
                "function": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}},
                    "required": ["name"],
                },
            },
            "required": ["type", "function"],
        },
    ],
    "description": "required or a named function: refused (400) for a model without tools.",
}

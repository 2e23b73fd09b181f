"""Tool calling on the wire: a call's `tools` and `tool_choice`, an assistant message's
`tool_calls` and a `tool` message's result, checked into the engine's shapes or refused naming the
field.

The model calls a tool; the caller runs it and sends its result back as a `tool` message that
answers the call's id; the model then answers with the result in hand. chatsite records each step
in the conversation and passes the tools to an engine whose model has `tools`. A model without
them answers in text: a call that leaves the choice to the model (`tool_choice` absent, "auto" or
"none") is answered as if it sent no tools, and one that insists ("required", or a function
named) is refused, since no reply could do what it asks.
"""

from __future__ import annotations

import json
import re
from typing import Any

from conversations.engines.base import ChatMessage, ToolCall
from conversations.engines.specs import ModelSpec
from conversations.gateway.errors import bad_request
from conversations.services.text import storable

MAX_TOOLS = 128  # OpenAI's limit
MAX_TOOLS_CHARS = 100_000  # the tools' definitions, as JSON: sent to the engine with every reply
MAX_TOOL_CALLS = 128  # in one assistant message
MAX_ARGUMENTS_CHARS = 100_000
MAX_TOOL_CALL_ID_CHARS = 100  # Message.tool_call_id
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")  # OpenAI's rule for a function's name
_CHOICES = ("none", "auto", "required")

Tools = tuple[dict[str, Any], ...]
ToolChoice = str | dict[str, Any] | None


def tools_of(data: dict[str, Any]) -> tuple[Tools, ToolChoice]:
    """The call's function tools, as the engine is given them, and its tool_choice."""
    if data.get("functions") is not None or data.get("function_call") is not None:
        name = "functions" if data.get("functions") is not None else "function_call"
        raise bad_request(
            f"{name} is OpenAI's deprecated form of tools: send tools and tool_choice.",
            name,
            "unsupported_parameter",
        )
    raw = data.get("tools")
    if raw is None:
        raw = []
    if not isinstance(raw, list) or len(raw) > MAX_TOOLS:
        raise bad_request(f"tools must be a list of at most {MAX_TOOLS} tools.", "tools")
    tools = tuple(_tool(item, f"tools[{index}]") for index, item in enumerate(raw))
    if len(json.dumps(tools)) > MAX_TOOLS_CHARS:
        raise bad_request(
            f"The tools' definitions are over {MAX_TOOLS_CHARS} characters together.",
            "tools",
            "too_long",
        )
    return tools, _tool_choice(data.get("tool_choice"), tools)


def _tool(item: object, where: str) -> dict[str, Any]:
    if not isinstance(item, dict) or item.get("type") != "function":
        raise bad_request(f'{where} must be {{"type": "function", "function": {{...}}}}.', where)
    function = item.get("function")
    if not isinstance(function, dict):
        raise bad_request(f"{where}.function must be an object.", f"{where}.function")
    name = function.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise bad_request(
            f"{where}.function.name must be 1 to 64 letters, digits, _ or -.",
            f"{where}.function.name",
        )
    checked: dict[str, Any] = {"name": name}
    description = function.get("description")
    if description is not None:
        if not isinstance(description, str) or not storable(description):
            raise bad_request(
                f"{where}.function.description must be text.", f"{where}.function.description"
            )
        checked["description"] = description
    parameters = function.get("parameters")
    if parameters is not None:
        if not isinstance(parameters, dict):
            raise bad_request(
                f"{where}.function.parameters must be a JSON Schema object.",
                f"{where}.function.parameters",
            )
        checked["parameters"] = parameters
    strict = function.get("strict")
    if strict is not None:
        if not isinstance(strict, bool):
            raise bad_request(
                f"{where}.function.strict must be true or false.", f"{where}.function.strict"
            )
        checked["strict"] = strict
    return {"type": "function", "function": checked}


def _tool_choice(raw: object, tools: Tools) -> ToolChoice:
    if raw is None:
        return None
    if isinstance(raw, str) and raw in _CHOICES:
        if raw == "required" and not tools:
            raise bad_request('tool_choice "required" needs tools to choose from.', "tool_choice")
        return raw
    function = raw.get("function") if isinstance(raw, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(raw, dict) or raw.get("type") != "function" or not isinstance(name, str):
        raise bad_request(
            'tool_choice must be "none", "auto", "required" or '
            '{"type": "function", "function": {"name": ...}}.',
            "tool_choice",
        )
    if name not in {tool["function"]["name"] for tool in tools}:
        raise bad_request(f"tool_choice names {name!r}, which is not in tools.", "tool_choice")
    return {"type": "function", "function": {"name": name}}


def for_model(tools: Tools, choice: ToolChoice, model: ModelSpec) -> tuple[Tools, ToolChoice]:
    """What the model's engine is given: the call's tools if it calls tools; else none, or a
    refusal if the call insists on a tool being called."""
    if model.tools or not tools:
        return tools, choice
    if choice not in (None, "auto", "none"):
        raise bad_request(
            f"The model {model.slug!r} cannot call tools, so tool_choice cannot require one; "
            'send tool_choice "auto" (answered in text) or use a model with tools.',
            "tool_choice",
            "tools_not_supported",
        )
    return (), None


def tool_calls_of(raw: object, where: str) -> tuple[ToolCall, ...]:
    """An assistant message's tool_calls, as a model made them."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or len(raw) > MAX_TOOL_CALLS:
        raise bad_request(f"{where} must be a list of at most {MAX_TOOL_CALLS} calls.", where)
    calls = []
    for index, item in enumerate(raw):
        at = f"{where}[{index}]"
        function = item.get("function") if isinstance(item, dict) else None
        if not isinstance(item, dict) or not isinstance(function, dict):
            raise bad_request(f'{at} must be {{"id", "type": "function", "function"}}.', at)
        call_id = tool_call_id_of(item.get("id"), f"{at}.id")
        name = function.get("name")
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise bad_request(f"{at}.function.name must be a function's name.", f"{at}.function")
        arguments = function.get("arguments", "")
        if (
            not isinstance(arguments, str)
            or len(arguments) > MAX_ARGUMENTS_CHARS
            or not storable(arguments)
        ):
            raise bad_request(
                f"{at}.function.arguments must be text (JSON) of at most "
                f"{MAX_ARGUMENTS_CHARS} characters.",
                f"{at}.function.arguments",
            )
        calls.append(ToolCall(call_id, name, arguments))
    return tuple(calls)


def tool_call_id_of(raw: object, where: str) -> str:
    if (
        not isinstance(raw, str)
        or not raw
        or len(raw) > MAX_TOOL_CALL_ID_CHARS
        or not raw.isprintable()
    ):
        raise bad_request(
            f"{where} must be the id of a tool call: printable text of 1 to "
            f"{MAX_TOOL_CALL_ID_CHARS} characters.",
            where,
        )
    return raw


def check_results(turns: list[ChatMessage], first_result: int, where: str) -> None:
    """The tool messages from `first_result` on (the new turn) answer calls of the assistant
    message just before them, each once."""
    before = turns[first_result - 1] if first_result > 0 else None
    if before is None or not before.tool_calls:
        raise bad_request(
            "A tool message must follow the assistant message whose tool call it answers.",
            where,
        )
    asked = {call.id for call in before.tool_calls}
    answered = [message.tool_call_id for message in turns[first_result:]]
    unknown = [call_id for call_id in answered if call_id not in asked]
    if unknown or len(set(answered)) != len(answered):
        raise bad_request(
            "Each tool message must answer one of the previous assistant message's tool calls, "
            f"once; {(unknown or answered)[0]!r} does not.",
            where,
        )

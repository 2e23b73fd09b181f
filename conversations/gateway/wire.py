"""A /v1/chat/completions request body, checked into a ChatCall, or refused naming the field.

The body is OpenAI's Chat Completions request. What chatsite cannot honour is refused with a 400
that names the parameter (code `unsupported_parameter`), never ignored: n other than 1,
logprobs, a JSON response format, penalties, logit_bias, audio, predicted outputs,
reasoning_effort, verbosity, web_search_options. A user message's `file` and `image_url` parts
are the call's attachments (gateway.parts, gateway.files); tools, tool calls and their results
are read in gateway.tools, the messages in gateway.messages. Fields that
change nothing in the reply (`user`, `metadata`, `store`, `service_tier`, `parallel_tool_calls`,
`stream_options`'s `include_obfuscation`, ...) are accepted and ignored, as OpenAI-compatible
servers do; the list is in docs/gateway.md.
"""

from __future__ import annotations

import json
import math
import uuid
from dataclasses import dataclass
from typing import Any

from conversations.engines.base import ChatMessage
from conversations.gateway.errors import (
    INVALID_VALUE,
    MISSING_FIELD,
    TOO_LONG,
    TOO_MANY,
    UNSUPPORTED_PARAMETER,
    GatewayError,
    bad_request,
)
from conversations.gateway.messages import messages_of
from conversations.gateway.parts import CallFile
from conversations.gateway.tools import ToolChoice, Tools, tools_of
from conversations.services.text import storable

MAX_STOP_SEQUENCES = 4  # OpenAI's limit
MAX_STOP_CHARS = 200
MAX_MODEL_CHARS = 200
_INT_RANGE = (-(2**63), 2**63 - 1)


@dataclass(frozen=True)
class ChatCall:
    """What a call asks for. The last message (the user's) is the new turn, the earlier user and
    assistant messages its history, the system messages its system prompt."""

    model: str
    content: str  # the new turn
    history: tuple[ChatMessage, ...] = ()
    system_prompt: str | None = None  # None: no system message was sent
    stream: bool = False
    include_usage: bool = False
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: tuple[str, ...] = ()
    seed: int | None = None
    # The files of the new turn, and of each message of the history (aligned with it).
    files: tuple[CallFile, ...] = ()
    history_files: tuple[tuple[CallFile, ...], ...] = ()
    # The functions the model may call, and whether it must (see gateway.tools).
    tools: Tools = ()
    tool_choice: ToolChoice = None
    # A turn of tool results instead of a user message (`content` is then empty): the tool
    # messages that answer the last assistant message's calls.
    tool_results: tuple[ChatMessage, ...] = ()

    @property
    def first_question(self) -> str:
        """The call's first user message: its conversation's title is made from it."""
        return next((m.content for m in self.history if m.role == "user"), self.content)


def parse_chat_call(body: bytes) -> ChatCall:
    return chat_call_of(json_object(body))


def json_object(body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        raise bad_request("The body is not valid JSON.", code="invalid_json") from None
    if not isinstance(data, dict):
        raise bad_request("The body must be a JSON object.", code="invalid_json")
    return data


def chat_call_of(data: dict[str, Any]) -> ChatCall:
    """A Chat Completions request body (a JSON object), checked."""
    _refuse_unsupported(data)
    offered, tool_choice = tools_of(data)
    model = data.get("model")
    if not isinstance(model, str) or not model.strip():
        raise bad_request(
            "model is required: the slug of one of your models.", "model", MISSING_FIELD
        )
    if len(model) > MAX_MODEL_CHARS:
        raise bad_request(f"model is limited to {MAX_MODEL_CHARS} characters.", "model", TOO_LONG)
    system, history, content, files, results = messages_of(data.get("messages"))
    stream = _optional_bool(data, "stream") or False
    options = data.get("stream_options")
    if options is not None and not stream:
        raise bad_request(
            "stream_options is only allowed with stream: true.", "stream_options", INVALID_VALUE
        )
    if options is not None and not isinstance(options, dict):
        raise bad_request("stream_options must be an object.", "stream_options", INVALID_VALUE)
    include_usage = bool(options and _optional_bool(options, "include_usage", "stream_options."))
    limit = data.get("max_completion_tokens")
    limit_name = "max_completion_tokens"
    if limit is None:  # the older name, still what most clients send
        limit, limit_name = data.get("max_tokens"), "max_tokens"
    return ChatCall(
        model=model.strip(),
        content=content,
        history=tuple(message for message, _ in history),
        history_files=tuple(attached for _, attached in history),
        files=files,
        system_prompt=system,
        stream=stream,
        include_usage=include_usage,
        max_tokens=_optional_int(limit, limit_name, minimum=1, maximum=2**31 - 1),
        temperature=_optional_number(data, "temperature", 0.0, 2.0),
        top_p=_optional_number(data, "top_p", 0.0, 1.0),
        stop=_stop(data.get("stop")),
        seed=_optional_int(data.get("seed"), "seed", *_INT_RANGE),
        tools=offered,
        tool_choice=tool_choice,
        tool_results=results,
    )


def parse_conversation_header(value: str | None) -> uuid.UUID | None:
    """X-Chatsite-Conversation: the id of a conversation of the caller's to add this call to."""
    if value is None or not value.strip():
        return None
    try:
        return uuid.UUID(value.strip())
    except ValueError:
        raise GatewayError(
            400,
            "X-Chatsite-Conversation must be the id of one of your conversations.",
            code="invalid_conversation",
        ) from None


def _stop(raw: object) -> tuple[str, ...]:
    if raw is None:
        return ()
    stops = [raw] if isinstance(raw, str) else raw
    if not isinstance(stops, list) or len(stops) > MAX_STOP_SEQUENCES:
        raise bad_request(
            f"stop must be a string or a list of up to {MAX_STOP_SEQUENCES} strings.",
            "stop",
            TOO_MANY if isinstance(stops, list) else INVALID_VALUE,
        )
    for stop in stops:
        if not isinstance(stop, str) or not stop or len(stop) > MAX_STOP_CHARS:
            raise bad_request(
                f"Each stop sequence must be text of 1 to {MAX_STOP_CHARS} characters.",
                "stop",
                INVALID_VALUE,
            )
        if not storable(stop):
            raise bad_request(
                "stop contains characters that cannot be saved.", "stop", INVALID_VALUE
            )
    return tuple(stops)


def _optional_bool(data: dict[str, Any], name: str, prefix: str = "") -> bool | None:
    value = data.get(name)
    if value is not None and not isinstance(value, bool):
        raise bad_request(
            f"{prefix}{name} must be true or false.", f"{prefix}{name}", INVALID_VALUE
        )
    return value


def _optional_number(data: dict[str, Any], name: str, low: float, high: float) -> float | None:
    value = data.get(name)
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not low <= value <= high
    ):
        raise bad_request(f"{name} must be a number from {low:g} to {high:g}.", name, INVALID_VALUE)
    return float(value)


def _optional_int(value: object, name: str, minimum: int, maximum: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise bad_request(
            f"{name} must be a whole number from {minimum} to {maximum}.", name, INVALID_VALUE
        )
    return value


def _refuse_unsupported(data: dict[str, Any]) -> None:
    """Parameters that would change the reply in ways this server cannot: refused by name."""
    n = data.get("n")
    if n is not None and (isinstance(n, bool) or n != 1):
        raise bad_request("Only n=1 is supported: one reply per call.", "n", UNSUPPORTED_PARAMETER)
    if data.get("logprobs") or data.get("top_logprobs") is not None:
        name = "logprobs" if data.get("logprobs") else "top_logprobs"
        raise bad_request("Log probabilities are not supported.", name, UNSUPPORTED_PARAMETER)
    response_format = data.get("response_format")
    if response_format is not None and response_format != {"type": "text"}:
        raise bad_request(
            "Only the text response format is supported.", "response_format", UNSUPPORTED_PARAMETER
        )
    for name in ("frequency_penalty", "presence_penalty"):
        if data.get(name) not in (None, 0, 0.0) or isinstance(data.get(name), bool):
            raise bad_request(f"{name} is not supported (only 0).", name, UNSUPPORTED_PARAMETER)
    if data.get("logit_bias"):
        raise bad_request("logit_bias is not supported.", "logit_bias", UNSUPPORTED_PARAMETER)
    if data.get("audio") is not None or data.get("modalities") not in (None, ["text"]):
        name = "audio" if data.get("audio") is not None else "modalities"
        raise bad_request("Only text is supported.", name, UNSUPPORTED_PARAMETER)
    if data.get("prediction") is not None:
        raise bad_request(
            "Predicted outputs are not supported.", "prediction", UNSUPPORTED_PARAMETER
        )
    # Each would change the reply: a reasoning model's effort, its answer's length, a search of
    # the web. Refused whatever the value, for no value of theirs is what this server does.
    for name, what in _NOT_SERVED.items():
        if data.get(name) is not None:
            raise bad_request(f"{what} is not supported.", name, UNSUPPORTED_PARAMETER)


_NOT_SERVED = {
    "reasoning_effort": "Reasoning effort",
    "verbosity": "Verbosity",
    "web_search_options": "Web search",
}

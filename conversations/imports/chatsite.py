"""chatsite's own exports: a conversation's JSON (`/api/conversations/<id>/export`) and the
JSON lines of every conversation (`/api/export.jsonl`), one conversation an object.

Everything the export holds comes back: the title, the conversation's model and settings, every
version of every message with its parent, and each reply's model, status, token counts, timings
and reasoning; `current_message` is the end of the branch shown. So exporting what was imported
gives the same file again, but for the ids (and the owner). A reply that was still being written when
it was exported comes back `interrupted`: it is not being written here.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from conversations.imports.source import (
    LEFT_OUT_ROLE,
    OUT_OF_RANGE,
    ConversationRefused,
    SourceConversation,
    SourceMessage,
    as_list,
    as_object,
    in_range,
    key_of,
    text_of,
    time_of,
)
from conversations.imports.trees import arrange
from conversations.models import Message

NAME = "chatsite"
LABEL = "chatsite"
SETTLED = {
    Message.Status.COMPLETE,
    Message.Status.CANCELLED,
    Message.Status.ERROR,
    Message.Status.INTERRUPTED,
}


def looks_like(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("messages"), list)
        and "current_message" in value
    )


def parse(value: Any) -> SourceConversation:
    raw = as_object(value, "The conversation")
    created_at = time_of(raw.get("created_at"), "Its `created_at`")
    system_prompt = raw.get("system_prompt")
    conversation = SourceConversation(
        external_id=key_of(raw.get("id"), "Its `id`"),
        title=text_of(raw.get("title"), "Its title"),
        created_at=created_at,
        updated_at=time_of(raw.get("updated_at"), "Its `updated_at`"),
        messages=[],
        system_prompt=None
        if system_prompt is None
        else text_of(system_prompt, "Its `system_prompt`"),
        fields={
            "title_is_custom": raw.get("title_is_custom") is True,
            "model_slug": _char(raw.get("model"), "Its `model`", 50),
            "temperature": _number(raw.get("temperature"), "Its `temperature`"),
            "max_tokens": _count(raw.get("max_tokens"), "Its `max_tokens`"),
            "pinned": raw.get("pinned") is True,
            "archived": raw.get("archived") is True,
            "project_name": _char(raw.get("project_name"), "Its `project_name`", 100),
        },
    )
    parents: dict[str, str | None] = {}
    for item in as_list(raw.get("messages"), "Its `messages`"):
        message = as_object(item, "A message")
        key = key_of(message.get("id"), "A message's `id`")
        parent = message.get("parent")
        parents[key] = None if parent is None else key_of(parent, "A message's `parent`")
        role = message.get("role")
        if role not in Message.Role.values:
            conversation.left_out[LEFT_OUT_ROLE] += 1
            continue
        conversation.messages.append(
            SourceMessage(
                key=key,
                parent_key=parents[key],
                role=role,
                content=text_of(message.get("content"), "A message's `content`"),
                created_at=time_of(message.get("created_at"), "A message's `created_at`"),
                fields=_message_fields(message),
            )
        )
    current = raw.get("current_message")
    conversation.messages, conversation.current_key = arrange(
        conversation.messages,
        parents,
        None if current is None else key_of(current, "Its `current_message`"),
        fallback_time=created_at,
    )
    if current is None and all(m.parent_key is None for m in conversation.messages):
        # Written as a plain list (before branches): it stays one, shown in order.
        conversation.current_key = None
    return conversation


def _message_fields(message: dict[str, Any]) -> dict[str, Any]:
    """The columns a reply keeps, each checked; unknown or missing ones take their default."""
    status = message.get("status", Message.Status.COMPLETE)
    if status not in Message.Status.values:
        raise ConversationRefused(f"A message's `status` {str(status)[:20]!r} is not one of ours.")
    fields: dict[str, Any] = {
        # Nothing writes it here: a reply being written when it was exported stopped there.
        "status": status if status in SETTLED else Message.Status.INTERRUPTED
    }
    for name, check in _FIELDS.items():
        if message.get(name) is not None:
            fields[name] = check(message[name], f"A message's `{name}`")
    ttft_ms = _number(message.get("ttft_ms"), "A message's `ttft_ms`")
    if ttft_ms is not None and fields.get("first_token_at") is not None:
        # Time to first token counts from when the engine could start (its model loaded):
        # keeping that moment keeps the figure.
        fields["engine_ready_at"] = _engine_ready_at(fields["first_token_at"], ttft_ms)
    return fields


def _engine_ready_at(first_token_at: datetime, ttft_ms: float) -> datetime:
    """The moment the engine was ready, `ttft_ms` before the first token, if it is in range."""
    try:
        ready: datetime | None = first_token_at - timedelta(milliseconds=ttft_ms)
    except OverflowError:  # a duration past timedelta's, or a moment before the year 1
        ready = None
    if ready is None or not in_range(ready):
        raise ConversationRefused(
            f"A message's `ttft_ms` puts the moment its engine was ready {OUT_OF_RANGE}."
        )
    return ready


def _char(value: Any, what: str, max_length: int) -> str:
    text = text_of(value, what)
    if len(text) > max_length:
        raise ConversationRefused(f"{what} is longer than {max_length} characters.")
    return text


def _number(value: Any, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConversationRefused(f"{what} is not a number.")
    return float(value)


def _count(value: Any, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**31:
        raise ConversationRefused(f"{what} is not a count.")
    return value


def _chars(max_length: int) -> Callable[[Any, str], str]:
    return lambda value, what: _char(value, what, max_length)


MAX_TOOL_CALLS = 128  # in one message, as the gateway takes them


def _tool_calls(value: Any, what: str) -> list[dict[str, Any]]:
    """An assistant message's tool calls, in OpenAI's shape, as the export wrote them."""
    calls = as_list(value, what)
    if len(calls) > MAX_TOOL_CALLS:
        raise ConversationRefused(f"{what} has more than {MAX_TOOL_CALLS} tool calls.")
    checked = []
    for call in calls:
        item = as_object(call, what)
        function = as_object(item.get("function"), what)
        checked.append(
            {
                "id": _chars(100)(item.get("id"), what),
                "type": "function",
                "function": {
                    "name": _chars(64)(function.get("name"), what),
                    "arguments": text_of(function.get("arguments"), what),
                },
            }
        )
    return checked


_FIELDS: dict[str, Callable[[Any, str], Any]] = {
    "engine": _chars(32),
    "model": _chars(200),
    "model_slug": _chars(50),
    "system_prompt": text_of,
    "reasoning": text_of,
    "temperature": _number,
    "max_tokens": _count,
    "first_token_at": time_of,
    "finished_at": time_of,
    "prompt_tokens": _count,
    "completion_tokens": _count,
    "finish_reason": _chars(32),
    "cancel_requested_at": time_of,
    "cancel_confirmed_at": time_of,
    "cancel_latency_ms": _number,
    "cancelled_by": _chars(150),
    "error": text_of,
    "tool_call_id": _chars(100),
    "tool_calls": _tool_calls,
}

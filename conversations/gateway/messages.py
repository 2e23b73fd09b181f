"""A Chat Completions request's `messages`, read into the call's system prompt, its history (each
message with its files), and its new turn: the last message, the user's, or the tool messages
that end the list, answering the tool calls of the assistant message before them."""

from __future__ import annotations

from django.conf import settings

from conversations.engines.base import ChatMessage
from conversations.engines.specs import MAX_SYSTEM_PROMPT_CHARS
from conversations.gateway.errors import (
    INVALID_VALUE,
    MISSING_FIELD,
    TOO_LONG,
    TOO_MANY,
    UNSUPPORTED_PARAMETER,
    bad_request,
)
from conversations.gateway.parts import CallFile, content_of
from conversations.gateway.tools import check_results, tool_call_id_of, tool_calls_of

MAX_MESSAGES = 1000
# The roles a message may have; "developer" is OpenAI's newer name for a system message.
_SYSTEM_ROLES = {"system", "developer"}
_ROLES = {*_SYSTEM_ROLES, "user", "assistant", "tool"}

_History = tuple[tuple[ChatMessage, tuple[CallFile, ...]], ...]


def messages_of(
    raw: object,
) -> tuple[str | None, _History, str, tuple[CallFile, ...], tuple[ChatMessage, ...]]:
    """The system prompt, the history (each message with its files), the new turn's text and
    files, or instead the tool results that are the new turn."""
    if raw is None:
        raise bad_request(
            "messages is required: the conversation so far.", "messages", MISSING_FIELD
        )
    if not isinstance(raw, list) or not raw:
        raise bad_request("messages must be a non-empty list.", "messages", INVALID_VALUE)
    if len(raw) > MAX_MESSAGES:
        raise bad_request(f"messages is limited to {MAX_MESSAGES} messages.", "messages", TOO_MANY)
    system: list[str] = []
    turns: list[tuple[ChatMessage, tuple[CallFile, ...]]] = []
    for index, item in enumerate(raw):
        where = f"messages[{index}]"
        message, files = _message(item, where)
        if message.role in _SYSTEM_ROLES:
            system.append(message.content)
        else:
            turns.append((message, files))
    prompt = "\n\n".join(system) if system else None
    if prompt is not None and len(prompt) > MAX_SYSTEM_PROMPT_CHARS:
        raise bad_request(
            f"The system messages are over {MAX_SYSTEM_PROMPT_CHARS} characters together.",
            "messages",
            TOO_LONG,
        )
    last = len(raw) - 1
    if turns and turns[-1][0].role == "tool":
        messages = [message for message, _ in turns]
        first_result = len(messages)
        while first_result > 0 and messages[first_result - 1].role == "tool":
            first_result -= 1
        check_results(messages, first_result, f"messages[{last}]")
        results = tuple(messages[first_result:])
        return prompt, tuple(turns[:first_result]), "", (), results
    if not turns or raw[last].get("role") != "user":
        raise bad_request(
            "The last message must be the user's (the reply answers it), or tool messages "
            "answering the tool calls before them.",
            f"messages[{last}].role",
            INVALID_VALUE,
        )
    last_turn, files = turns[-1]
    content = last_turn.content.strip()
    if not content and not files:
        raise bad_request(
            f"messages[{last}].content is empty.", f"messages[{last}].content", INVALID_VALUE
        )
    return prompt, tuple(turns[:-1]), content, files, ()


def _message(item: object, where: str) -> tuple[ChatMessage, tuple[CallFile, ...]]:
    """One message of the list, with its files (a user message's only)."""
    if not isinstance(item, dict):
        raise bad_request(f"{where} must be an object.", where, INVALID_VALUE)
    role = item.get("role")
    # Tested as text first: a list or an object cannot be looked up in a set.
    if not isinstance(role, str) or role not in _ROLES:
        raise bad_request(
            f"{where}.role must be system, developer, user, assistant or tool.",
            f"{where}.role",
            INVALID_VALUE,
        )
    calls = tool_calls_of(item.get("tool_calls"), f"{where}.tool_calls")
    if calls and role != "assistant":
        raise bad_request(
            "Only an assistant message has tool_calls.", f"{where}.tool_calls", INVALID_VALUE
        )
    if item.get("function_call") is not None:
        raise bad_request(
            "function_call is OpenAI's deprecated form of tool_calls: send tool_calls.",
            f"{where}.function_call",
            UNSUPPORTED_PARAMETER,
        )
    text, files = content_of(
        item.get("content"),
        f"{where}.content",
        allow_null=role == "assistant",
        allow_files=role == "user",
    )
    if role in ("user", "tool") and len(text) > settings.CHAT_MAX_PROMPT_CHARS:
        raise bad_request(
            f"{where}.content is over {settings.CHAT_MAX_PROMPT_CHARS} characters, "
            "the longest message this server takes.",
            f"{where}.content",
            TOO_LONG,
        )
    if role == "tool":
        call_id = tool_call_id_of(item.get("tool_call_id"), f"{where}.tool_call_id")
        return ChatMessage("tool", text, tool_call_id=call_id), ()
    return ChatMessage(role, text, tool_calls=calls), files

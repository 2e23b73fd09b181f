"""Open WebUI's chat export (Settings > Chats > Export): a JSON list of chats.

Each chat is {id, title, created_at, updated_at (seconds since the epoch), chat: {title, params,
history: {messages: id -> {id, parentId, childrenIds, role, content, timestamp, model},
currentId}, messages: [...]}}. `history` is the tree, with every version of every turn, and
`currentId` the end of the branch shown; older exports have only the list `chat.messages`,
which is then taken as one branch.

A system message becomes the conversation's system prompt (so does `params.system`); messages
with no text are left out and counted. A reasoning model's thinking, which Open WebUI writes into
the reply before its answer as `<details type="reasoning">`, is kept apart as the reply's
reasoning (shown collapsed); its tool calls' `<details type="tool_calls">` are left out and
counted. A reply not `done` was still being written: it is imported interrupted; one with an
`error` as failed, with its error.
"""

from __future__ import annotations

import html
import re
from datetime import datetime
from typing import Any

from conversations.imports.source import (
    LEFT_OUT_EMPTY,
    LEFT_OUT_ROLE,
    LEFT_OUT_SYSTEM,
    LEFT_OUT_TOOL,
    UNFINISHED_AT_SOURCE,
    SourceConversation,
    SourceMessage,
    as_list,
    as_object,
    key_of,
    text_of,
    time_of,
)
from conversations.imports.trees import arrange
from conversations.models import Message

NAME = "openwebui"
LABEL = "Open WebUI"
# Open WebUI writes seconds in most places and milliseconds in some (chat.timestamp).
MILLISECONDS_FROM = 100_000_000_000
# What Open WebUI writes into a reply besides its answer: `<details type="reasoning"
# done="true" duration="3">`, a <summary> ("Thought for 3 seconds"), the thinking with each line
# quoted ("> ", HTML-escaped by newer versions), `</details>`; tool calls likewise.
DETAILS = re.compile(r'<details type="(reasoning|tool_calls|code_interpreter)"[^>\n]*>')
DETAILS_END = "</details>"
SUMMARY = re.compile(r"\s*<summary>[^\n]*?</summary>\n?")
QUOTE = re.compile(r"^> ?", re.MULTILINE)


def looks_like(value: Any) -> bool:
    if not isinstance(value, dict) or not isinstance(value.get("chat"), dict):
        return False
    chat = value["chat"]
    return isinstance(chat.get("history"), dict) or isinstance(chat.get("messages"), list)


def _when(value: Any, what: str) -> datetime | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return time_of(value, what, milliseconds=value >= MILLISECONDS_FROM)
    return time_of(value, what)


def parse(value: Any) -> SourceConversation:
    raw = as_object(value, "The chat")
    chat = as_object(raw.get("chat"), "Its `chat`")
    created_at = _when(raw.get("created_at", chat.get("timestamp")), "Its `created_at`")
    conversation = SourceConversation(
        external_id=key_of(raw.get("id"), "Its `id`"),
        title=text_of(raw.get("title") or chat.get("title"), "Its title"),
        created_at=created_at,
        updated_at=_when(raw.get("updated_at"), "Its `updated_at`"),
        messages=[],
    )
    params = chat.get("params")
    if isinstance(params, dict) and isinstance(params.get("system"), str) and params["system"]:
        conversation.system_prompt = text_of(params["system"], "Its system prompt").strip()
    history = chat.get("history")
    if isinstance(history, dict) and isinstance(history.get("messages"), dict):
        nodes = [(key, as_object(node, "A message")) for key, node in history["messages"].items()]
        current = history.get("currentId")
        linear = False
    else:
        items = as_list(chat.get("messages"), "Its `chat.messages`")
        nodes = [
            (str(as_object(node, "A message").get("id", i)), node) for i, node in enumerate(items)
        ]
        current = None
        linear = True
    parents: dict[str, str | None] = {}
    previous: str | None = None
    for node_key, node in nodes:
        key = key_of(node_key, "A message's id")
        if linear:
            parent = previous
        else:
            stated = node.get("parentId")
            parent = None if stated is None else key_of(stated, "A message's `parentId`")
        parents[key] = parent
        previous = key
        _add(conversation, key, parent, node)
    conversation.messages, conversation.current_key = arrange(
        conversation.messages,
        parents,
        current if isinstance(current, str) else None,
        fallback_time=created_at,
    )
    return conversation


def _add(
    conversation: SourceConversation, key: str, parent: str | None, node: dict[str, Any]
) -> None:
    role = node.get("role")
    content = node.get("content")
    if isinstance(content, list):  # the OpenAI shape some versions store: text parts
        content = "\n\n".join(
            text_of(part.get("text"), "A text part of a message")
            for part in content
            if isinstance(part, dict)
        )
    text = text_of(content, "A message's content").strip()
    reasoning = ""
    if role == "assistant":
        text, reasoning, tool_calls = _parts(text)
        if tool_calls:
            conversation.left_out[LEFT_OUT_TOOL] += tool_calls
    if role not in ("system", "user", "assistant"):
        conversation.left_out[LEFT_OUT_ROLE] += 1
    elif not text and not reasoning:
        if role != "system":
            conversation.left_out[LEFT_OUT_EMPTY] += 1
    elif role == "system":
        if conversation.system_prompt is None:
            conversation.system_prompt = text
        else:
            conversation.left_out[LEFT_OUT_SYSTEM] += 1
    else:
        conversation.messages.append(
            SourceMessage(
                key=key,
                parent_key=parent,
                role=role,
                content=text,
                created_at=_when(node.get("timestamp"), "A message's `timestamp`"),
                fields=_reply_fields(node, reasoning) if role == "assistant" else {},
            )
        )


def _parts(content: str) -> tuple[str, str, int]:
    """A reply's answer, its reasoning, and how many tool calls were in it (each a <details>
    block of its own). Found with str.find from one block to the next: linear in the text,
    whatever a file holds (an opening without an end is left as text)."""
    answer, reasoning, tool_calls = [], [], 0
    position = 0
    while (opening := DETAILS.search(content, position)) is not None:
        end = content.find(DETAILS_END, opening.end())
        if end < 0:
            break
        answer.append(content[position : opening.start()])
        if opening.group(1) == "reasoning":
            body = html.unescape(content[opening.end() : end])
            if summary := SUMMARY.match(body):
                body = body[summary.end() :]
            reasoning.append(QUOTE.sub("", body).strip())
        else:
            tool_calls += 1
        position = end + len(DETAILS_END)
    answer.append(content[position:])
    return "".join(answer).strip(), "\n\n".join(r for r in reasoning if r), tool_calls


def _reply_fields(node: dict[str, Any], reasoning: str) -> dict[str, Any]:
    fields: dict[str, Any] = {"reasoning": reasoning} if reasoning else {}
    model = node.get("model")
    if isinstance(model, str):
        fields["model"] = model[:200]
    error = node.get("error")
    if isinstance(error, dict) and isinstance(error.get("content"), str):
        fields["status"] = Message.Status.ERROR
        fields["error"] = text_of(error["content"], "A message's error").strip()
    elif node.get("done") is False:  # stopped while it was being written
        fields["status"] = Message.Status.INTERRUPTED
        fields["error"] = UNFINISHED_AT_SOURCE
    return fields

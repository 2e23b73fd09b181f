"""Claude's data export: conversations.json (inside the export's zip), a list of conversations.

Each has uuid, name, created_at and updated_at (ISO 8601) and chat_messages: {uuid, sender
("human" or "assistant"), text, content (blocks: text, tool_use, tool_result, thinking...),
created_at}. The export holds the branch the user saw, as a list; where a message names its
`parent_message_uuid` (and the conversation its `current_leaf_message_uuid`), that tree is kept.

What is not kept, counted in the report: tool blocks, thinking blocks, and messages with no
text (an attachment alone).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from conversations.imports.source import (
    LEFT_OUT_EMPTY,
    LEFT_OUT_HIDDEN,
    LEFT_OUT_ROLE,
    LEFT_OUT_TOOL,
    ConversationRefused,
    SourceConversation,
    SourceMessage,
    as_list,
    as_object,
    key_of,
    text_of,
    time_of,
)
from conversations.imports.trees import arrange

NAME = "claude"
LABEL = "Claude"
ROLES = {"human": "user", "user": "user", "assistant": "assistant"}
TOOL_BLOCKS = {"tool_use", "tool_result", "server_tool_use", "web_search_tool_result"}


def looks_like(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("chat_messages"), list)


def parse(value: Any) -> SourceConversation:
    raw = as_object(value, "The conversation")
    created_at = time_of(raw.get("created_at"), "Its `created_at`")
    conversation = SourceConversation(
        external_id=key_of(raw.get("uuid"), "Its `uuid`"),
        title=text_of(raw.get("name"), "Its name"),
        created_at=created_at,
        updated_at=time_of(raw.get("updated_at"), "Its `updated_at`"),
        messages=[],
    )
    parents: dict[str, str | None] = {}
    previous: str | None = None
    for position, item in enumerate(as_list(raw.get("chat_messages"), "Its `chat_messages`")):
        message = as_object(item, "A message")
        key = key_of(message.get("uuid", str(position)), "A message's `uuid`")
        stated = message.get("parent_message_uuid")
        # Without parents the list is the branch shown: each message follows the one before.
        parent = previous if stated is None else key_of(stated, "A message's parent")
        parents[key] = parent
        previous = key
        role = ROLES.get(str(message.get("sender", "")).lower())
        text, left_out = _text(message)
        conversation.left_out.update(left_out)
        if role is None:
            conversation.left_out[LEFT_OUT_ROLE] += 1
        elif not text:
            if not left_out:
                conversation.left_out[LEFT_OUT_EMPTY] += 1
        else:
            conversation.messages.append(
                SourceMessage(
                    key=key,
                    parent_key=parent,
                    role=role,
                    content=text,
                    created_at=time_of(message.get("created_at"), "A message's `created_at`"),
                )
            )
    current = raw.get("current_leaf_message_uuid")
    conversation.messages, conversation.current_key = arrange(
        conversation.messages,
        parents,
        current if isinstance(current, str) else None,
        fallback_time=created_at,
    )
    return conversation


def _text(message: dict[str, Any]) -> tuple[str, Counter[str]]:
    """A message's text from its text blocks (or its `text`), and the blocks left out."""
    left_out: Counter[str] = Counter()
    blocks = message.get("content")
    if not isinstance(blocks, list) or not blocks:
        return text_of(message.get("text"), "A message's text").strip(), left_out
    texts = []
    for block in blocks:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind is not None and not isinstance(kind, str):
            raise ConversationRefused("A content block's `type` is not text.")
        if kind == "text":
            texts.append(text_of(block.get("text"), "A text block"))
        elif kind in TOOL_BLOCKS:
            left_out[LEFT_OUT_TOOL] += 1
        elif kind in ("thinking", "redacted_thinking"):
            left_out[LEFT_OUT_HIDDEN] += 1
    return "\n\n".join(t for t in texts if t.strip()).strip(), left_out

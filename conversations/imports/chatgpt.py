"""ChatGPT's data export: conversations.json (inside the export's zip), a list of conversations.

Each conversation is a tree, `mapping`: node id -> {message, parent, children}. The root node has
no message; a message has author.role (system, user, assistant, tool), content (content_type and
`parts`, or `text`), create_time (seconds since the epoch, or null) and metadata. `current_node`
is the last node of the branch the user saw. Every branch is kept: an edited question or a
regenerated answer becomes another version of its turn.

A reply's citation and entity markers (private-use characters) become what ChatGPT shows in their
place (chatgpt_markers.py). A reply that was still being written (`status` "in_progress") is
imported interrupted, one the user stopped (`finish_details` "interrupted") stopped, and one cut
off at the length limit (`finish_details` "max_tokens") as cut off.

What is not kept, counted in the report: tool messages and the assistant's calls to tools
(`recipient` other than "all"), hidden nodes (custom instructions, reasoning), messages with no
text (an image alone). The first visible system message becomes the conversation's system prompt.
"""

from __future__ import annotations

from typing import Any

from conversations.imports import chatgpt_markers
from conversations.imports.source import (
    LEFT_OUT_EMPTY,
    LEFT_OUT_HIDDEN,
    LEFT_OUT_ROLE,
    LEFT_OUT_SYSTEM,
    LEFT_OUT_TOOL,
    UNFINISHED_AT_SOURCE,
    ConversationRefused,
    SourceConversation,
    SourceMessage,
    as_object,
    key_of,
    text_of,
    time_of,
)
from conversations.imports.trees import arrange
from conversations.models import Message

NAME = "chatgpt"
LABEL = "ChatGPT"
# Content that ChatGPT keeps in the tree but does not show as a message.
HIDDEN_CONTENT = {"thoughts", "reasoning_recap", "user_editable_context", "model_editable_context"}
# A message's `status` while it was being written, or when it did not finish.
UNFINISHED = {"in_progress", "finished_partial_completion"}


def looks_like(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("mapping"), dict)


def parse(value: Any) -> SourceConversation:
    raw = as_object(value, "The conversation")
    mapping = as_object(raw.get("mapping"), "Its `mapping`")
    created_at = time_of(raw.get("create_time"), "Its `create_time`")
    conversation = SourceConversation(
        external_id=_external_id(raw),
        title=text_of(raw.get("title"), "Its title"),
        created_at=created_at,
        updated_at=time_of(raw.get("update_time"), "Its `update_time`"),
        messages=[],
    )
    parents: dict[str, str | None] = {}
    for node_key, node in mapping.items():
        node = as_object(node, "A node of its mapping")
        parent = node.get("parent")
        parents[node_key] = None if parent is None else key_of(parent, "A node's parent")
        message = node.get("message")
        if message is None:  # the tree's root: nothing to show, nothing lost
            continue
        kept = _message(node_key, parents[node_key], as_object(message, "A node's message"))
        if isinstance(kept, str):
            if kept:
                conversation.left_out[kept] += 1
        elif kept.role == "system":
            if conversation.system_prompt is None:
                conversation.system_prompt = kept.content
            else:
                conversation.left_out[LEFT_OUT_SYSTEM] += 1
        else:
            conversation.messages.append(kept)
    current = raw.get("current_node")
    conversation.messages, conversation.current_key = arrange(
        conversation.messages,
        parents,
        current if isinstance(current, str) else None,
        fallback_time=created_at,
    )
    return conversation


def _external_id(raw: dict[str, Any]) -> str:
    found = raw.get("conversation_id") or raw.get("id")
    return "" if found is None else key_of(found, "Its id")


def _message(key: str, parent: str | None, message: dict[str, Any]) -> SourceMessage | str:
    """The message to keep (a system one becomes the prompt), or why it is left out ("" when
    nothing is lost: an empty system message ChatGPT adds to every conversation)."""
    author = message.get("author")
    role = author.get("role") if isinstance(author, dict) else None
    content = message.get("content")
    content = content if isinstance(content, dict) else {}
    metadata = message.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    text = _text(content)
    if role == "assistant":
        text = chatgpt_markers.shown(text, metadata)
    text = text.strip()
    content_type = content.get("content_type")
    if content_type is not None and not isinstance(content_type, str):
        raise ConversationRefused("A message's `content_type` is not text.")
    if role == "tool" or message.get("recipient", "all") not in ("all", None):
        return LEFT_OUT_TOOL
    if role not in ("system", "user", "assistant"):
        return LEFT_OUT_ROLE
    if not text:
        return "" if role == "system" else LEFT_OUT_EMPTY
    if (
        content_type in HIDDEN_CONTENT
        or metadata.get("is_visually_hidden_from_conversation")
        or metadata.get("is_user_system_message")
    ):
        return LEFT_OUT_HIDDEN
    return SourceMessage(
        key=key,
        parent_key=parent,
        role=role,
        content=text,
        created_at=time_of(message.get("create_time"), "A message's `create_time`"),
        fields=_reply_fields(message, metadata) if role == "assistant" else {},
    )


def _reply_fields(message: dict[str, Any], metadata: dict[str, Any]) -> dict[str, Any]:
    """A reply's model, and how it ended when it did not finish as a whole answer."""
    fields: dict[str, Any] = {}
    model = metadata.get("model_slug")
    if isinstance(model, str):
        fields["model"] = model[:200]
    finish = metadata.get("finish_details")
    ending = finish.get("type") if isinstance(finish, dict) else None
    status = message.get("status")
    if isinstance(status, str) and status in UNFINISHED:
        fields["status"] = Message.Status.INTERRUPTED
        fields["error"] = UNFINISHED_AT_SOURCE
    elif ending == "interrupted":  # the user pressed Stop
        fields["status"] = Message.Status.CANCELLED
    elif ending == "max_tokens":
        fields["finish_reason"] = "length"
    return fields


def _text(content: dict[str, Any]) -> str:
    """The text of a message's content: its string parts (images and files are objects)."""
    parts = content.get("parts")
    if isinstance(parts, list):
        return "\n\n".join(
            text_of(part, "A message's text") for part in parts if isinstance(part, str)
        )
    return text_of(content.get("text"), "A message's text") if "text" in content else ""

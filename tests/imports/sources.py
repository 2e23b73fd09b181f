"""Export files as other apps write them, built here from their published shapes (nothing is
fetched): ChatGPT's and Claude's data exports (a zip holding conversations.json) and Open WebUI's
chat export (a JSON list)."""

from __future__ import annotations

import io
import json
import zipfile
from datetime import UTC, datetime
from typing import Any

# 2024-03-01 09:00:00 UTC: far enough back that the sidebar files it under "Older".
T0 = 1709283600.0


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(T0 + seconds, tz=UTC)


def iso(seconds: float) -> str:
    return at(seconds).isoformat().replace("+00:00", "Z")


def zipped(members: dict[str, Any]) -> bytes:
    """A zip of JSON members (bytes members are written as they are)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in members.items():
            data = content if isinstance(content, bytes) else json.dumps(content).encode()
            archive.writestr(name, data)
    return buffer.getvalue()


# --- ChatGPT -------------------------------------------------------------------------------------


def chatgpt_node(
    node_id: str,
    parent: str | None,
    role: str | None,
    text: str | list[Any] = "",
    seconds: float | None = None,
    *,
    content_type: str = "text",
    recipient: str = "all",
    status: str = "finished_successfully",
    **metadata: Any,
) -> dict[str, Any]:
    """One entry of `mapping`; role None is the tree's root (no message)."""
    message = None
    if role is not None:
        parts = text if isinstance(text, list) else [text]
        content: dict[str, Any] = {"content_type": content_type, "parts": parts}
        if content_type in ("code", "execution_output"):
            content = {"content_type": content_type, "text": text}
        message = {
            "id": node_id,
            "author": {"role": role, "name": None, "metadata": {}},
            "create_time": None if seconds is None else T0 + seconds,
            "update_time": None,
            "content": content,
            "status": status,
            "end_turn": (role == "assistant" and status == "finished_successfully") or None,
            "weight": 1.0,
            "metadata": metadata,
            "recipient": recipient,
        }
    return {"id": node_id, "message": message, "parent": parent, "children": []}


def chatgpt_conversation(
    conversation_id: str, title: str, nodes: list[dict[str, Any]], current_node: str
) -> dict[str, Any]:
    mapping = {node["id"]: node for node in nodes}
    for node in nodes:
        if node["parent"] is not None:
            mapping[node["parent"]]["children"].append(node["id"])
    times = [n["message"]["create_time"] for n in nodes if n["message"]]
    times = [t for t in times if t is not None] or [T0]
    return {
        "title": title,
        "create_time": min(times),
        "update_time": max(times),
        "mapping": mapping,
        "moderation_results": [],
        "current_node": current_node,
        "plugin_ids": None,
        "conversation_id": conversation_id,
        "conversation_template_id": None,
        "gizmo_id": None,
        "is_archived": False,
        "safe_urls": [],
        "default_model_slug": "gpt-4o",
        "id": conversation_id,
    }


def chatgpt_branched(
    conversation_id: str = "c0ffee00-0000-4000-8000-000000000001",
) -> dict[str, Any]:
    """A question, its answer, then an edited follow-up: the first version answered directly,
    the second (the branch shown) through a tool call. ChatGPT's hidden system node is there."""
    return chatgpt_conversation(
        conversation_id,
        "Arithmetic",
        [
            chatgpt_node("root", None, None),
            chatgpt_node(
                "sys", "root", "system", "", None, is_visually_hidden_from_conversation=True
            ),
            chatgpt_node("u1", "sys", "user", "What is 2+2?", 10),
            chatgpt_node("a1", "u1", "assistant", "4", 20, model_slug="gpt-4o"),
            chatgpt_node("u2a", "a1", "user", "And 3+3?", 30),
            chatgpt_node("a2a", "u2a", "assistant", "6", 40, model_slug="gpt-4o"),
            chatgpt_node("u2b", "a1", "user", "And 3+4?", 50),
            chatgpt_node(
                "call",
                "u2b",
                "assistant",
                "print(3+4)",
                55,
                content_type="code",
                recipient="python",
            ),
            chatgpt_node("tool", "call", "tool", "7", 56, content_type="execution_output"),
            chatgpt_node("a2b", "tool", "assistant", "It is 7.", 60, model_slug="gpt-4o"),
        ],
        current_node="a2b",
    )


def chatgpt_with_system_prompt(
    conversation_id: str = "c0ffee00-0000-4000-8000-000000000002",
) -> dict[str, Any]:
    """A visible system prompt, a question with an image, and a hidden custom-instructions node."""
    image = {"content_type": "image_asset_pointer", "asset_pointer": "file-service://file-1"}
    return chatgpt_conversation(
        conversation_id,
        "Pirate talk",
        [
            chatgpt_node("root", None, None),
            chatgpt_node("sys", "root", "system", "You are a pirate.", 1),
            chatgpt_node(
                "ctx",
                "sys",
                "user",
                "I like boats.",
                2,
                content_type="user_editable_context",
                is_visually_hidden_from_conversation=True,
            ),
            chatgpt_node("u1", "ctx", "user", [image, "What is in this picture?"], 3),
            chatgpt_node("a1", "u1", "assistant", "Arr, a parrot.", 4),
            chatgpt_node("u2", "a1", "user", [image], 5),  # an image alone: no text
        ],
        current_node="u2",
    )


def chatgpt_zip(*conversations: dict[str, Any]) -> bytes:
    """ChatGPT's data export: conversations.json beside the HTML viewer and the user's files."""
    return zipped(
        {
            "conversations.json": list(conversations),
            "user.json": {"id": "user-1", "email": "alice@example.com"},
            "message_feedback.json": [],
            "chat.html": b"<html><body>viewer</body></html>",
        }
    )


# --- Claude --------------------------------------------------------------------------------------


def claude_message(
    uuid: str, sender: str, text: str, seconds: float, blocks: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    return {
        "uuid": uuid,
        "text": text,
        "content": blocks
        if blocks is not None
        else [
            {
                "type": "text",
                "text": text,
                "start_timestamp": iso(seconds),
                "stop_timestamp": iso(seconds),
                "citations": [],
            }
        ],
        "sender": sender,
        "created_at": iso(seconds),
        "updated_at": iso(seconds),
        "attachments": [],
        "files": [],
    }


def claude_conversation(
    uuid: str = "5ca1ab1e-0000-4000-8000-000000000001",
) -> dict[str, Any]:
    """A question, an answer after a tool call and some thinking, and a follow-up."""
    return {
        "uuid": uuid,
        "name": "Planning a trip",
        "created_at": iso(100),
        "updated_at": iso(400),
        "account": {"uuid": "acc-1"},
        "chat_messages": [
            claude_message("m1", "human", "Where should I go in May?", 100),
            claude_message(
                "m2",
                "assistant",
                "Lisbon is lovely in May.",
                200,
                blocks=[
                    {"type": "thinking", "thinking": "Spring weather...", "summaries": []},
                    {"type": "tool_use", "name": "web_search", "input": {"query": "May weather"}},
                    {"type": "tool_result", "name": "web_search", "content": []},
                    {"type": "text", "text": "Lisbon is lovely in May.", "citations": []},
                ],
            ),
            claude_message("m3", "human", "And in June?", 300),
            claude_message("m4", "assistant", "Try Porto.", 400),
        ],
    }


def claude_zip(*conversations: dict[str, Any]) -> bytes:
    return zipped(
        {
            "conversations.json": list(conversations),
            "users.json": [{"uuid": "acc-1", "full_name": "Alice"}],
            "projects.json": [],
        }
    )


# --- Open WebUI ----------------------------------------------------------------------------------


def openwebui_chat(chat_id: str = "0be11e00-0000-4000-8000-000000000001") -> dict[str, Any]:
    """A question whose answer was regenerated: two versions, the second shown."""

    def message(
        mid: str, parent: str | None, children: list[str], role: str, content: str, seconds: int
    ) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "id": mid,
            "parentId": parent,
            "childrenIds": children,
            "role": role,
            "content": content,
            "timestamp": int(T0) + seconds,
        }
        if role == "assistant":
            entry |= {"model": "llama3.1:8b", "modelName": "Llama 3.1", "done": True}
        else:
            entry["models"] = ["llama3.1:8b"]
        return entry

    messages = {
        "q1": message("q1", None, ["r1", "r2"], "user", "Name a colour.", 10),
        "r1": message("r1", "q1", [], "assistant", "Blue.", 20),
        "r2": message("r2", "q1", [], "assistant", "Green.", 30),
    }
    return {
        "id": chat_id,
        "user_id": "user-1",
        "title": "Colours",
        "chat": {
            "id": "",
            "title": "Colours",
            "models": ["llama3.1:8b"],
            "params": {"system": "Answer in one word."},
            "history": {"messages": messages, "currentId": "r2"},
            "messages": [messages["q1"], messages["r2"]],
            "tags": [],
            "timestamp": int(T0 * 1000) + 10_000,
            "files": [],
        },
        "updated_at": int(T0) + 30,
        "created_at": int(T0) + 10,
        "share_id": None,
        "archived": False,
        "pinned": False,
        "meta": {},
        "folder_id": None,
    }


def as_json(value: Any) -> bytes:
    return json.dumps(value).encode()

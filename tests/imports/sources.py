"""Export files as other apps write them, built here from their published shapes (nothing is
fetched): ChatGPT's and Claude's data exports (a zip holding conversations.json) and Open WebUI's
chat export (a JSON list)."""

from __future__ import annotations

import html
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


def chatgpt_sharded_zip(*shards: list[dict[str, Any]]) -> bytes:
    """ChatGPT's larger data exports: conversations.json split into conversations-000.json,
    conversations-001.json, ... (each a JSON list), beside the viewer and the user's files."""
    return zipped(
        {f"conversations-{i:03}.json": list(shard) for i, shard in enumerate(shards)}
        | {
            "user.json": {"id": "user-1", "email": "alice@example.com"},
            "message_feedback.json": [],
            "chat.html": b"<html><body>viewer</body></html>",
        }
    )


# A searched reply as ChatGPT writes it: a zero-width space first, highlighted spans between
# U+E203 and U+E204, citations between U+E200 and U+E201 (fields split by U+E202), U+E206 after
# a sentence's citations, an entity marker (its JSON list: kind, name, description), and a
# citation right before a code fence, on the fence's line.
CITED_REPLY = (
    "\u200b\ue203Lisbon is mild in May.\ue204 \ue200cite\ue202turn0search0\ue201\ue206\n\n"
    '\ue203Nearby, \ue200entity\ue202["city","Porto","a city in Portugal"]\ue201 '
    "is warmer.\ue204 \ue200cite\ue202turn0search1\ue202turn0search0\ue201\ue206\n\n"
    "A forecast script:\n"
    "\ue200cite\ue202turn0search2\ue201```python\nprint('sunny')\n```\n\n"
    "\ue200i\ue202turn0image0\ue202turn0image1\ue201Enjoy the trip."
)


def chatgpt_reference(marker: str, *sources: tuple[str, str]) -> dict[str, Any]:
    """One of `metadata.content_references`: what a citation marker stands for."""
    return {
        "matched_text": marker,
        "start_idx": CITED_REPLY.find(marker),
        "end_idx": CITED_REPLY.find(marker) + len(marker),
        "refs": [],
        "alt": "",
        "prompt_text": None,
        "type": "grouped_webpages",
        "items": [
            {
                "title": title,
                "url": url,
                "pub_date": None,
                "snippet": None,
                "attribution_segments": None,
                "supporting_websites": [],
                "refs": [{"turn_index": 0, "ref_type": "search", "ref_index": 0}],
                "hue": None,
                "attributions": None,
                "attribution": url.split("/")[2],
            }
            for title, url in sources
        ],
        "status": "done",
        "error": None,
        "style": None,
    }


def chatgpt_searched(
    conversation_id: str = "c0ffee00-0000-4000-8000-000000000003", *, with_sources: bool = True
) -> dict[str, Any]:
    """A question answered after a web search (the search call and its result are tool
    traffic), its reply full of ChatGPT's markers; then a follow-up whose reply was still being
    written when the export was made (`status` "in_progress")."""
    weather = ("Lisbon weather in May", "https://weather.example/lisbon")
    porto = ("Porto [travel] guide", "https://travel.example/porto")
    script = ("Forecast API", "https://api.example/forecast")
    references = [
        chatgpt_reference("\ue200cite\ue202turn0search0\ue201", weather),
        chatgpt_reference("\ue200cite\ue202turn0search1\ue202turn0search0\ue201", porto, weather),
        chatgpt_reference("\ue200cite\ue202turn0search2\ue201", script),
        {"matched_text": "\ue203", "type": "hidden", "refs": ["hidden"], "invalid": False},
        {"matched_text": " ", "type": "sources_footnote", "sources": []},
    ]
    return chatgpt_conversation(
        conversation_id,
        "Trip weather",
        [
            chatgpt_node("root", None, None),
            chatgpt_node("u1", "root", "user", "Weather in Lisbon in May?", 10),
            chatgpt_node(
                "search",
                "u1",
                "assistant",
                'search("Lisbon weather May")',
                11,
                content_type="code",
                recipient="web",
            ),
            chatgpt_node("results", "search", "tool", "", 12, content_type="code"),
            chatgpt_node(
                "a1",
                "results",
                "assistant",
                CITED_REPLY,
                13,
                model_slug="gpt-4o",
                content_references=references if with_sources else [],
                citations=[],
            ),
            chatgpt_node("u2", "a1", "user", "And in June?", 20),
            chatgpt_node(
                "a2", "u2", "assistant", "June is", 21, status="in_progress", model_slug="gpt-4o"
            ),
        ],
        current_node="a2",
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


def openwebui_reasoning_chat(
    chat_id: str = "0be11e00-0000-4000-8000-000000000002",
) -> dict[str, Any]:
    """A reasoning model's answer, its thinking written into the reply as Open WebUI writes it
    (a <details type="reasoning"> block, each line quoted and HTML-escaped), then a follow-up
    whose reply was stopped while it was being written (`done` false)."""
    chat = openwebui_chat(chat_id)
    thinking = "The user wants *one* colour.\nGreen & calm fits."
    quoted = "\n".join(f"> {line}" for line in thinking.splitlines())
    reasoning = (
        '<details type="reasoning" done="true" duration="3">\n'
        "<summary>Thought for 3 seconds</summary>\n"
        f"{html.escape(quoted)}\n"
        "</details>\n"
    )
    messages = chat["chat"]["history"]["messages"]
    messages["r2"]["content"] = f"{reasoning}Green."
    messages["r2"]["childrenIds"] = ["q2"]
    messages["q2"] = messages["q1"] | {
        "id": "q2", "parentId": "r2", "childrenIds": ["r3"], "content": "Another?",
        "timestamp": int(T0) + 40,
    }  # fmt: skip
    messages["r3"] = messages["r2"] | {
        "id": "r3", "parentId": "q2", "childrenIds": [], "timestamp": int(T0) + 50,
        "content": '<details type="reasoning" done="false">\n<summary>Thinking…</summary>\n'
        "> Maybe red\n</details>\nRe",
        "done": False,
    }  # fmt: skip
    chat["chat"]["history"]["currentId"] = "r3"
    chat["chat"]["messages"] = [messages[key] for key in ("q1", "r2", "q2", "r3")]
    chat["title"] = chat["chat"]["title"] = "Thinking colours"
    return chat


def as_json(value: Any) -> bytes:
    return json.dumps(value).encode()

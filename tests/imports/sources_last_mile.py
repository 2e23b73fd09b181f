"""Exports that hold what imports once lost, built here in each exporter's real format: ChatGPT's
sharded zip, a searched reply full of its private-use markers and a reply still being written;
an Open WebUI reasoning model's replies, one stopped while it was written."""

from __future__ import annotations

import html
from typing import Any

from tests.imports.sources import (
    T0,
    chatgpt_conversation,
    chatgpt_node,
    openwebui_chat,
    zipped,
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

"""Problem 2 of the last mile: imports without loss, from files built here in each exporter's real
format. A sharded ChatGPT zip is read whole; ChatGPT's citation markers become links to their
sources (or go); Open WebUI's reasoning is kept apart; unfinished replies stay unfinished; and a
chatsite export of all that comes back the same."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from conversations.imports.chatgpt_markers import shown as markers_shown
from conversations.imports.source import LEFT_OUT_TOOL, ImportRefused
from conversations.models import Conversation, Message
from conversations.pages.markdown import render_markdown
from tests.imports.helpers import by_content, imported, left_out, upload
from tests.imports.sources import as_json, chatgpt_branched, chatgpt_with_system_prompt, zipped
from tests.imports.sources_last_mile import (
    CITED_REPLY,
    chatgpt_searched,
    chatgpt_sharded_zip,
    openwebui_reasoning_chat,
)
from tests.imports.test_round_trip import same_content

pytestmark = pytest.mark.django_db

PRIVATE_USE = re.compile("[\ue000-\uf8ff]")


def reply_to(conversation: Conversation, question: str) -> Message:
    asked = conversation.messages.get(content=question)
    return conversation.messages.get(parent=asked)


def test_problem_2_a_sharded_chatgpt_zip_is_imported_whole(alice: Any) -> None:
    data = chatgpt_sharded_zip(
        [chatgpt_branched(), chatgpt_with_system_prompt()], [chatgpt_searched()]
    )

    report = imported(alice, data)

    assert report.format == "chatgpt"
    assert [i.title for i in report.imported] == ["Arithmetic", "Pirate talk", "Trip weather"]


def test_problem_2_shards_are_read_in_their_order_wherever_the_zip_lists_them(
    alice: Any,
) -> None:
    second, first = chatgpt_with_system_prompt(), chatgpt_branched()
    data = zipped(
        {
            "export/conversations-010.json": [chatgpt_searched()],
            "export/conversations-002.json": [second],
            "export/conversations-000.json": [first],
            "__MACOSX/export/._conversations-000.json": b"\x00\x05\x16\x07",
            "export/user.json": {"id": "user-1"},
        }
    )

    report = imported(alice, data)

    assert [i.title for i in report.imported] == ["Arithmetic", "Pirate talk", "Trip weather"]


def test_problem_2_the_shards_together_are_held_to_the_imports_limit(
    alice: Any, settings: Any
) -> None:
    settings.CHAT_IMPORT_MAX_BYTES = 10_000
    shard = [chatgpt_branched()]  # about 3.8 KB of JSON: three are over the limit, one is not
    data = chatgpt_sharded_zip(shard, shard, shard)
    assert len(data) < 10_000

    with pytest.raises(ImportRefused) as refused:
        imported(alice, data)

    assert refused.value.code == "too_large"
    assert refused.value.message.startswith(
        "Its conversations file, in 3 shards in the zip, is 11.1 KB"
    )
    assert not Conversation.objects.filter(owner=alice).exists()


def test_problem_2_a_broken_shard_keeps_the_shards_before_it_with_keep_partial(
    alice: Any,
) -> None:
    data = zipped(
        {
            "conversations-000.json": [chatgpt_branched()],
            "conversations-001.json": b'[{"mapping": ',
        }
    )

    with pytest.raises(ImportRefused) as refused:
        imported(alice, data)
    assert refused.value.code == "not_json"
    assert not Conversation.objects.filter(owner=alice).exists()

    report = imported(alice, data, keep_partial=True)
    assert [i.title for i in report.imported] == ["Arithmetic"]
    assert "not valid JSON" in report.stopped


def test_problem_2_chatgpt_citation_markers_become_links_to_their_sources(alice: Any) -> None:
    report = imported(alice, chatgpt_sharded_zip([chatgpt_searched()]))

    chat = Conversation.objects.get(pk=report.imported[0].id)
    reply = reply_to(chat, "Weather in Lisbon in May?")
    assert not PRIVATE_USE.search(reply.content)
    assert "\u200b" not in reply.content
    assert reply.content.startswith(
        "Lisbon is mild in May. [\\[1\\]](<https://weather.example/lisbon>)"
    )
    assert "Nearby, Porto is warmer." in reply.content, "an entity shows its name"
    assert "turn0" not in reply.content and "cite" not in reply.content
    assert reply.content.endswith(
        "**Sources**\n\n"
        "1. [Lisbon weather in May](<https://weather.example/lisbon>)\n"
        "2. [Porto \\[travel\\] guide](<https://travel.example/porto>)\n"
        "3. [Forecast API](<https://api.example/forecast>)"
    ), "each source once, numbered as first cited"
    html = render_markdown(reply.content)
    assert (
        '<a href="https://travel.example/porto" rel="noopener noreferrer nofollow">[2]</a>' in html
    )
    assert '<code class="language-python">' in html, "the fence after a citation is code"
    assert left_out(report, "Trip weather") == {LEFT_OUT_TOOL: 2}


def test_problem_2_citation_markers_without_sources_are_removed(alice: Any) -> None:
    report = imported(alice, chatgpt_sharded_zip([chatgpt_searched(with_sources=False)]))

    reply = reply_to(
        Conversation.objects.get(pk=report.imported[0].id), "Weather in Lisbon in May?"
    )
    assert not PRIVATE_USE.search(reply.content)
    assert "turn0" not in reply.content and "Sources" not in reply.content
    assert "A forecast script:\n```python\nprint('sunny')\n```" in reply.content
    assert '<code class="language-python">' in render_markdown(reply.content)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("No markers here.", "No markers here."),
        ("An \ue200entity\ue202Invincible\ue201 fan.", "An Invincible fan."),
        ("A \ue200entity\ue202[[[[\ue201 list.", "A [[[[ list."),
        (
            "See \ue200url\ue202the docs\ue202https://docs.example/a\ue201.",
            "See [the docs](<https://docs.example/a>).",
        ),
        ("See \ue200url\ue202the docs\ue202javascript:alert(1)\ue201.", "See the docs."),
        ("Unclosed \ue200cite\ue202turn0search0 marker", "Unclosed citeturn0search0 marker"),
    ],
    ids=["none", "entity as text", "entity not json", "link", "unsafe link", "unclosed"],
)
def test_problem_2_each_kind_of_marker_is_shown_as_chatgpt_shows_it(
    text: str, expected: str
) -> None:
    assert markers_shown(text, {}) == expected


def test_problem_2_a_source_that_is_not_a_web_address_is_not_linked() -> None:
    marker = "\ue200cite\ue202turn0search0\ue201"
    metadata = {
        "content_references": [
            {"matched_text": marker, "items": [{"title": "x", "url": "javascript:alert(1)"}]},
            "not an object",
        ]
    }

    assert markers_shown(f"Claim. {marker}", metadata) == "Claim. "


def test_problem_2_an_interrupted_chatgpt_reply_is_imported_interrupted(alice: Any) -> None:
    searched = chatgpt_searched()
    stopped = searched["mapping"]["a1"]["message"]
    stopped["metadata"]["finish_details"] = {"type": "interrupted"}
    report = imported(alice, chatgpt_sharded_zip([searched, chatgpt_branched()]))

    chat = Conversation.objects.get(pk=report.imported[0].id)
    rows = by_content(chat)
    assert rows["June is"].status == Message.Status.INTERRUPTED
    assert rows["June is"].can_continue
    assert reply_to(chat, "Weather in Lisbon in May?").status == Message.Status.CANCELLED
    other = Conversation.objects.get(pk=report.imported[1].id)
    assert set(other.messages.values_list("status", flat=True)) == {Message.Status.COMPLETE}


def test_problem_2_statuses_of_other_shapes_leave_a_reply_complete(alice: Any) -> None:
    searched = chatgpt_searched()
    searched["mapping"]["a2"]["message"]["status"] = ["in_progress"]
    searched["mapping"]["a1"]["message"]["metadata"]["finish_details"] = "interrupted"
    chat = openwebui_reasoning_chat()
    chat["chat"]["history"]["messages"]["r3"] |= {"done": "false", "error": "failed"}

    report = imported(alice, chatgpt_sharded_zip([searched]))
    report_owui = imported(alice, as_json([chat]))

    for done in (report, report_owui):
        conversation = Conversation.objects.get(pk=done.imported[0].id)
        assert set(conversation.messages.values_list("status", flat=True)) == {"complete"}


def test_problem_2_open_webui_reasoning_is_kept_apart_from_the_answer(alice: Any) -> None:
    report = imported(alice, as_json([openwebui_reasoning_chat()]))

    chat = Conversation.objects.get(pk=report.imported[0].id)
    answer = chat.messages.get(content="Green.")
    assert answer.reasoning == "The user wants *one* colour.\nGreen & calm fits."
    assert answer.status == Message.Status.COMPLETE
    unfinished = chat.messages.get(content="Re")
    assert unfinished.reasoning == "Maybe red"
    assert unfinished.status == Message.Status.INTERRUPTED
    assert chat.current_leaf == unfinished
    assert "<details" not in "".join(chat.messages.values_list("content", flat=True))


def test_problem_2_open_webui_tool_calls_and_errors_are_not_shown_as_raw_text(alice: Any) -> None:
    chat = openwebui_reasoning_chat()
    messages = chat["chat"]["history"]["messages"]
    messages["r1"]["content"] = (
        '<details type="tool_calls" done="true" id="call_1" name="web" arguments="{}">\n'
        "<summary>Tool Executed</summary>\n</details>\nBlue."
    )
    messages["r3"]["error"] = {"content": "The model is unavailable."}

    report = imported(alice, as_json([chat]))

    conversation = Conversation.objects.get(pk=report.imported[0].id)
    rows = by_content(conversation)
    assert "Blue." in rows
    assert rows["Re"].status == Message.Status.ERROR
    assert rows["Re"].error == "The model is unavailable."
    assert left_out(report, "Thinking colours") == {LEFT_OUT_TOOL: 1}


def test_problem_2_reasoning_and_statuses_come_back_the_same_from_a_chatsite_export(
    alice: Any, alice_api: Client, bob_api: Client
) -> None:
    report = imported(alice, as_json([openwebui_reasoning_chat()]))
    chat_id = report.imported[0].id
    exported = alice_api.get(f"/api/conversations/{chat_id}/export?format=json")
    assert [m["reasoning"] for m in exported.json()["messages"]] == [
        "",
        "",
        "The user wants *one* colour.\nGreen & calm fits.",
        "",
        "Maybe red",
    ]

    response = bob_api.post("/api/imports/", {"file": upload(exported.content, "chat.json")})

    assert response.status_code == 201, response.content
    copy = response.json()["imported"][0]["id"]
    again = bob_api.get(f"/api/conversations/{copy}/export?format=json").json()
    assert same_content(again) == same_content(exported.json())
    assert [m["status"] for m in again["messages"]][-1] == "interrupted"


def test_problem_2_the_fixture_reply_really_breaks_without_the_fix() -> None:
    """The fixture shows the losses: read as it is, its markers are boxes and its fence is none."""
    html = render_markdown(CITED_REPLY)

    assert PRIVATE_USE.search(html)
    assert '<code class="language-python">' not in html

"""Each format, from files written here in its published shape: what becomes what."""

from __future__ import annotations

from typing import Any

import pytest

from conversations.imports.importer import ALREADY_IMPORTED, TWICE_IN_FILE
from conversations.imports.source import (
    LEFT_OUT_EMPTY,
    LEFT_OUT_HIDDEN,
    LEFT_OUT_TOOL,
    ImportRefused,
)
from conversations.models import Conversation
from tests.imports.helpers import by_content, imported, left_out, shown
from tests.imports.sources import (
    as_json,
    at,
    chatgpt_branched,
    chatgpt_with_system_prompt,
    chatgpt_zip,
    claude_conversation,
    claude_message,
    claude_zip,
    openwebui_chat,
)

pytestmark = pytest.mark.django_db


def test_it_imports_chatgpt_with_both_branches_and_the_one_shown(alice: Any) -> None:
    report = imported(alice, chatgpt_zip(chatgpt_branched(), chatgpt_with_system_prompt()))

    assert report.format == "chatgpt"
    assert [(i.title, i.messages) for i in report.imported] == [
        ("Arithmetic", 6),
        ("Pirate talk", 2),
    ]
    chat = Conversation.objects.get(pk=report.imported[0].id)
    assert chat.owner == alice
    assert (chat.origin, chat.origin_detail) == ("import", "chatgpt")
    assert chat.external_id == "c0ffee00-0000-4000-8000-000000000001"
    assert chat.imported_at is not None
    # current_node is shown: the edited question, answered after a tool call.
    assert shown(chat) == [
        ("user", "What is 2+2?"),
        ("assistant", "4"),
        ("user", "And 3+4?"),
        ("assistant", "It is 7."),
    ]
    rows = by_content(chat)
    # The first version of the follow-up is kept beside it, with its answer.
    assert rows["And 3+3?"].parent == rows["4"] == rows["And 3+4?"].parent
    assert rows["6"].parent == rows["And 3+3?"]
    assert rows["It is 7."].parent == rows["And 3+4?"], "it follows the question, not the tool"
    assert rows["What is 2+2?"].parent is None
    assert chat.current_leaf == rows["It is 7."]
    # The source's times, for the conversation and each message.
    assert (chat.created_at, chat.updated_at) == (at(10), at(60))
    assert rows["And 3+4?"].created_at == at(50)
    assert rows["4"].model == "gpt-4o" and rows["4"].status == "complete"
    assert left_out(report, "Arithmetic") == {LEFT_OUT_TOOL: 2}


def test_a_chatgpt_system_prompt_becomes_the_conversations_and_hidden_nodes_are_counted(
    alice: Any,
) -> None:
    report = imported(alice, chatgpt_zip(chatgpt_with_system_prompt()))

    chat = Conversation.objects.get(pk=report.imported[0].id)
    assert chat.system_prompt == "You are a pirate."
    assert shown(chat) == [("user", "What is in this picture?"), ("assistant", "Arr, a parrot.")]
    assert left_out(report, "Pirate talk") == {LEFT_OUT_HIDDEN: 1, LEFT_OUT_EMPTY: 1}


def test_it_imports_claude_text_blocks_and_counts_tool_and_thinking_blocks(alice: Any) -> None:
    report = imported(alice, claude_zip(claude_conversation()))

    assert report.format == "claude"
    chat = Conversation.objects.get(pk=report.imported[0].id)
    assert (chat.title, chat.origin_detail) == ("Planning a trip", "claude")
    assert chat.external_id == "5ca1ab1e-0000-4000-8000-000000000001"
    assert shown(chat) == [
        ("user", "Where should I go in May?"),
        ("assistant", "Lisbon is lovely in May."),
        ("user", "And in June?"),
        ("assistant", "Try Porto."),
    ]
    assert (chat.created_at, chat.updated_at) == (at(100), at(400))
    assert by_content(chat)["And in June?"].created_at == at(300)
    assert left_out(report, "Planning a trip") == {LEFT_OUT_TOOL: 2, LEFT_OUT_HIDDEN: 1}


def test_claude_conversations_json_without_its_zip_is_detected_too(alice: Any) -> None:
    report = imported(alice, as_json([claude_conversation()]))

    assert report.format == "claude" and len(report.imported) == 1


def test_it_imports_open_webui_with_its_regenerated_reply(alice: Any) -> None:
    report = imported(alice, as_json([openwebui_chat()]))

    assert report.format == "openwebui"
    chat = Conversation.objects.get(pk=report.imported[0].id)
    assert chat.system_prompt == "Answer in one word."
    assert shown(chat) == [("user", "Name a colour."), ("assistant", "Green.")]
    rows = by_content(chat)
    assert rows["Blue."].parent == rows["Green."].parent == rows["Name a colour."]
    assert rows["Green."].model == "llama3.1:8b"
    assert (chat.created_at, chat.updated_at) == (at(10), at(30))
    assert rows["Blue."].created_at == at(20)


def test_an_explicit_format_is_used_and_a_wrong_one_is_refused(alice: Any) -> None:
    data = as_json([claude_conversation()])
    assert imported(alice, data, fmt="claude").format == "claude"

    with pytest.raises(ImportRefused) as refused:
        imported(alice, data, fmt="chatgpt")
    assert refused.value.code == "wrong_shape"
    assert "not a ChatGPT export" in refused.value.message


def test_importing_again_skips_what_was_imported(alice: Any, bob: Any) -> None:
    data = chatgpt_zip(chatgpt_branched(), chatgpt_with_system_prompt())
    imported(alice, data)

    again = imported(alice, data)

    assert again.imported == []
    assert [(s.title, s.reason, s.messages) for s in again.skipped] == [
        ("Arithmetic", ALREADY_IMPORTED, None),
        ("Pirate talk", ALREADY_IMPORTED, None),
    ]
    assert Conversation.objects.filter(owner=alice).count() == 2
    # Another user's import is theirs: the same file gives bob his own copies.
    assert len(imported(bob, data).imported) == 2
    assert Conversation.objects.filter(owner=alice).count() == 2


def test_a_conversation_twice_in_one_file_is_imported_once(alice: Any) -> None:
    report = imported(alice, as_json([openwebui_chat(), openwebui_chat()]))

    assert len(report.imported) == 1
    assert [s.reason for s in report.skipped] == [TWICE_IN_FILE]


def test_a_conversation_without_a_title_gets_its_first_words(alice: Any) -> None:
    chat = openwebui_chat()
    chat["title"] = chat["chat"]["title"] = ""

    report = imported(alice, as_json([chat]))

    assert report.imported[0].title == "Name a colour."


def test_an_older_open_webui_export_without_history_is_one_branch(alice: Any) -> None:
    chat = openwebui_chat()
    del chat["chat"]["history"]

    report = imported(alice, as_json([chat]))

    conversation = Conversation.objects.get(pk=report.imported[0].id)
    assert shown(conversation) == [("user", "Name a colour."), ("assistant", "Green.")]


def test_claude_parents_where_given_keep_its_branches(alice: Any) -> None:
    chat = claude_conversation()
    first, answer, follow_up, last = chat["chat_messages"]
    retried = claude_message("m2b", "assistant", "Porto is lovely in May.", 250)
    for message, parent in ((first, None), (answer, "m1"), (retried, "m1"), (follow_up, "m2")):
        message["parent_message_uuid"] = parent or "00000000-0000-4000-8000-000000000000"
    last["parent_message_uuid"] = "m3"
    chat["chat_messages"] = [first, answer, retried, follow_up, last]
    chat["current_leaf_message_uuid"] = "m2b"

    report = imported(alice, as_json([chat]))

    conversation = Conversation.objects.get(pk=report.imported[0].id)
    assert shown(conversation) == [
        ("user", "Where should I go in May?"),
        ("assistant", "Porto is lovely in May."),
    ]
    rows = by_content(conversation)
    assert rows["Try Porto."].parent == rows["And in June?"]
    assert rows["And in June?"].parent == rows["Lisbon is lovely in May."]

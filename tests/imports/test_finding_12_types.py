"""Issue 23, finding 12: a list or an object where an export has text (ChatGPT's `content_type`,
Claude's block `type`, Open WebUI's text part) refuses its conversation with a reason (an
ImportRefused, which the API and the page answer 400; the conversation skipped with
keep_partial), never an unexpected exception (a 500)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from conversations.imports.importer import Skipped
from conversations.imports.source import ImportRefused
from conversations.models import Conversation
from tests.imports.helpers import imported
from tests.imports.sources import (
    as_json,
    chatgpt_branched,
    claude_conversation,
    openwebui_chat,
)

pytestmark = pytest.mark.django_db

NOT_TEXT = [
    pytest.param([], id="empty-list"),
    pytest.param(["text"], id="list"),
    pytest.param({}, id="empty-dict"),
    pytest.param({"type": "text"}, id="dict"),
]


def chatgpt_content_type(value: Any) -> tuple[dict[str, Any], str]:
    conversation = chatgpt_branched()
    conversation["mapping"]["u1"]["message"]["content"]["content_type"] = value
    return conversation, "A message's `content_type` is not text."


def claude_block_type(value: Any) -> tuple[dict[str, Any], str]:
    conversation = claude_conversation()
    conversation["chat_messages"][0]["content"][0]["type"] = value
    return conversation, "A content block's `type` is not text."


def openwebui_text_part(value: Any) -> tuple[dict[str, Any], str]:
    chat = openwebui_chat()
    chat["chat"]["history"]["messages"]["q1"]["content"] = [{"type": "text", "text": value}]
    return chat, "A text part of a message is not text."


FIELDS = [
    pytest.param(chatgpt_content_type, "Arithmetic", id="chatgpt-content_type"),
    pytest.param(claude_block_type, "Planning a trip", id="claude-block-type"),
    pytest.param(openwebui_text_part, "Colours", id="openwebui-text-part"),
]


@pytest.mark.parametrize("value", NOT_TEXT)
@pytest.mark.parametrize(("build", "title"), FIELDS)
def test_finding_12_a_field_that_is_not_text_refuses_its_conversation_with_400(
    alice: Any,
    build: Callable[[Any], tuple[dict[str, Any], str]],
    title: str,
    value: Any,
) -> None:
    conversation, reason = build(value)

    with pytest.raises(ImportRefused) as refused:
        imported(alice, as_json([conversation]))

    assert refused.value.code == "bad_conversation"
    assert refused.value.message == (
        f"Conversation 1 of the file ({title}): {reason} Nothing was imported; choose "
        "to keep what can be imported to import the others."
    )
    assert not Conversation.objects.exists()


@pytest.mark.parametrize("value", NOT_TEXT)
@pytest.mark.parametrize(("build", "title"), FIELDS)
def test_finding_12_with_keep_partial_that_conversation_is_skipped_with_its_reason(
    alice: Any,
    build: Callable[[Any], tuple[dict[str, Any], str]],
    title: str,
    value: Any,
) -> None:
    conversation, reason = build(value)
    good, _ = build("text")
    good = good | {"title": "Good", "name": "Good", "id": "good", "uuid": "good"}
    good["conversation_id"] = "good"

    report = imported(alice, as_json([conversation, good]), keep_partial=True)

    assert [i.title for i in report.imported] == ["Good"]
    assert Skipped(title, "", reason) in report.skipped


def distinct_words(chars: int) -> str:
    """About `chars` characters of words that are all different: their search vector is past
    PostgreSQL's 1 MB limit on one tsvector well before `chars` is."""
    words = (f"w{n:07x}" for n in range(chars // 9 + 1))
    return " ".join(words)[:chars].rstrip()


@pytest.mark.parametrize("keep_partial", [False, True])
def test_finding_12_a_message_past_the_index_limit_is_imported(
    alice: Any, keep_partial: bool
) -> None:
    conversation = openwebui_chat()
    long_answer = distinct_words(999_000)  # within CHAT_IMPORT_MAX_MESSAGE_CHARS
    conversation["chat"]["history"]["messages"]["r2"]["content"] = long_answer

    report = imported(alice, as_json([conversation]), keep_partial=keep_partial)

    assert [i.title for i in report.imported] == ["Colours"]
    assert Conversation.objects.get().messages.filter(content=long_answer).exists()

"""A reply longer than PostgreSQL's full-text limit (a tsvector holds at most 1 MB): it is saved
whole, and found by the words of its beginning (migration 0012 indexes a prefix of long text)."""

from __future__ import annotations

import itertools
import string
from types import SimpleNamespace
from typing import Any

import pytest

from conversations import search
from conversations.generation import rows
from conversations.models import Message
from conversations.search.query import INDEXED_CHARS
from tests.search.chats import chat, on_postgresql

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(not on_postgresql, reason="the tsvector limit is PostgreSQL's"),
]


def distinct_words(count: int) -> list[str]:
    """`count` different words of five letters: none is the start of another, so a search for one
    (its last word read as a prefix) finds that word only."""
    letters = itertools.product(string.ascii_lowercase, repeat=5)
    return ["".join(word) for word in itertools.islice(letters, count)]


def test_finding_7_a_reply_of_a_megabyte_of_distinct_words_is_saved_and_found_by_its_beginning(
    alice: Any,
) -> None:
    conversation = chat(alice, "Long", "Go on")
    reply = Message.objects.create(
        conversation=conversation,
        parent=conversation.current_leaf,
        role="assistant",
        status=Message.Status.STREAMING,
    )
    words = distinct_words(200_000)
    text = " ".join(words)
    assert len(text) == 1_199_999  # parsed whole, 2 MB of vector

    # The generation's final save, given what it reads of its plan.
    plan = SimpleNamespace(
        conversation_id=conversation.pk,
        message_id=reply.pk,
        owner_id=alice.pk,
        model=SimpleNamespace(slug="default"),
    )
    saved = rows.finish(plan, rows.Outcome(status=Message.Status.COMPLETE, text=text))  # type: ignore[arg-type]

    assert saved is not None
    reply.refresh_from_db()
    assert (reply.status, reply.content) == (Message.Status.COMPLETE, text)
    near_the_start, past_the_prefix = words[10], words[INDEXED_CHARS // 6 + 1_000]
    assert text.index(past_the_prefix) > INDEXED_CHARS
    [hit] = search.search(alice, near_the_start).hits
    assert hit.message_id == reply.pk
    assert f"<mark>{near_the_start}</mark>" in hit.snippet
    assert search.search(alice, past_the_prefix).hits == []

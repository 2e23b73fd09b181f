"""Snippets are plain text: a message's Markdown without its syntax, escaped, the matches in
<mark>, cut at word boundaries, on either database."""

from __future__ import annotations

from typing import Any

import pytest

from conversations import search
from conversations.services.plain import plain_text
from tests.search.chats import chat

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "markdown, plain",
    [
        ("# Heading\n\nSome **bold**, _it_ and `code`", "Heading Some bold, it and code"),
        ("[the docs](https://example.com/x) and ![a chart](c.png)", "the docs and a chart"),
        ("- one\n- two\n\n1. three\n\n> quoted", "one two three quoted"),
        ("```python\nprint('hi')\n```", "print('hi')"),
        ("| a | b |\n|---|---|\n| c | d |", "a b c d"),
        ("line one\nline two  \nline three\n\n***", "line one line two line three"),
        # Raw HTML is off, as on the page: a tag typed is text; entities are their character.
        ("<b>bold</b> &amp; snake_case_name * 3", "<b>bold</b> & snake_case_name * 3"),
    ],
)
def test_plain_text_is_what_a_reader_sees_of_the_markdown(markdown: str, plain: str) -> None:
    assert plain_text(markdown) == plain


def test_a_snippet_shows_the_text_without_its_markdown(alice: Any) -> None:
    chat(
        alice,
        "Docs",
        "Hi",
        "## Zeppelins\n\nThe **zeppelin** is in [the docs](https://example.com/z).\n\n"
        "```\nfly(zeppelin)\n```",
    )
    [hit] = search.search(alice, "zeppelin").hits
    snippet = str(hit.snippet).replace("<mark>", "").replace("</mark>", "")
    assert "zeppelin is in the docs" in snippet
    assert "fly(zeppelin)" in snippet
    for syntax in ("**", "##", "](", "https://", "```"):
        assert syntax not in snippet
    assert "<mark>zeppelin</mark>" in str(hit.snippet).lower()


def test_a_snippet_is_escaped_and_keeps_only_its_marks(alice: Any) -> None:
    chat(alice, "Hostile", "**<script>alert('zeppelin')</script>** & `<img src=x>`")
    [hit] = search.search(alice, "zeppelin").hits
    assert "<script" not in hit.snippet and "<img" not in hit.snippet
    assert "&lt;/script&gt;" in hit.snippet and "&lt;img src=x&gt;" in hit.snippet
    assert "**" not in hit.snippet and "`" not in hit.snippet


def test_a_long_snippet_is_cut_at_word_boundaries(alice: Any) -> None:
    words = [f"word{i:03d}" for i in range(400)]
    words[200] = "zeppelin"
    chat(alice, "Long", "**" + " ".join(words) + "**")
    [hit] = search.search(alice, "zeppelin").hits
    snippet = str(hit.snippet).replace("<mark>", "").replace("</mark>", "")
    assert "zeppelin" in snippet and len(snippet) < 400
    for piece in snippet.strip("…").split():
        assert piece == "zeppelin" or (piece.startswith("word") and len(piece) == 7), piece

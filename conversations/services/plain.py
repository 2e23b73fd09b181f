"""A message's Markdown as the plain text a snippet or a title shows: what a reader sees of it,
without its syntax (no `**`, `#`, fences, list markers or link targets), on one line.

Read with the parser the page renders with (CommonMark and GFM tables, raw HTML off: a tag
someone typed stays text, as the page shows it), so a snippet holds the words the page does.
"""

from __future__ import annotations

from collections.abc import Iterable

from markdown_it import MarkdownIt
from markdown_it.token import Token

from conversations.models import Conversation

_markdown = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")

# Tokens whose content is text a reader sees: the text of inline runs, and code.
_TEXT = {"text", "code_inline", "code_block", "fence"}
_BREAKS = {"softbreak", "hardbreak"}


def plain_text(markdown: str) -> str:
    """`markdown`'s visible text, its blocks and lines joined by single spaces."""
    return " ".join("".join(_words(_markdown.parse(markdown))).split())


def first_words(markdown: str) -> str:
    """A conversation's title until one is written: the first words a reader sees of its first
    message (no Markdown)."""
    return plain_title(markdown, limit=Conversation.FIRST_WORDS_CHARS)


def plain_title(markdown: str, *, limit: int) -> str:
    """`markdown`'s visible text as a title: one line of at most `limit` characters."""
    return cut_at_word(plain_text(markdown), limit=limit)


def cut_at_word(text: str, *, limit: int) -> str:
    """`text` if it has at most `limit` characters; else cut after a word (rather than inside
    one), with an ellipsis, within `limit`."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]  # room for the ellipsis
    if text[limit - 1] != " " and " " in cut:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" ,;:.-") + "…"


def _words(tokens: Iterable[Token]) -> Iterable[str]:
    for token in tokens:
        if token.type in _TEXT:
            yield token.content
        elif token.type in _BREAKS or token.block:
            yield " "  # blocks (paragraphs, cells, items) and lines never run together
        if token.children:
            yield from _words(token.children)

"""A message's Markdown as the plain text a snippet shows: what a reader sees of it, without its
syntax (no `**`, `#`, fences, list markers or link targets), on one line.

Read with the parser the page renders with (CommonMark and GFM tables, raw HTML off: a tag
someone typed stays text, as the page shows it), so a snippet holds the words the page does.
"""

from __future__ import annotations

from collections.abc import Iterable

from markdown_it import MarkdownIt
from markdown_it.token import Token

_markdown = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")

# Tokens whose content is text a reader sees: the text of inline runs, and code.
_TEXT = {"text", "code_inline", "code_block", "fence"}
_BREAKS = {"softbreak", "hardbreak"}


def plain_text(markdown: str) -> str:
    """`markdown`'s visible text, its blocks and lines joined by single spaces."""
    return " ".join("".join(_words(_markdown.parse(markdown))).split())


def _words(tokens: Iterable[Token]) -> Iterable[str]:
    for token in tokens:
        if token.type in _TEXT:
            yield token.content
        elif token.type in _BREAKS or token.block:
            yield " "  # blocks (paragraphs, cells, items) and lines never run together
        if token.children:
            yield from _words(token.children)

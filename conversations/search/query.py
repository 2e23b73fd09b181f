"""What a search asks for: the text typed, cleaned, and read as a tsquery (PostgreSQL) or as
words to contain (the fallback), and how many results a page holds."""

from __future__ import annotations

import re
from typing import Any

CONFIG = "simple"  # the configuration the indexes were built with (migrations 0010, 0012)
# How a text becomes a vector, as migration 0010 indexes it, exactly (or the index is not
# used): < and > are spaces, for the parser would drop anything shaped like an HTML tag and
# all of a <script> element, which people paste and look for.
VECTOR = f"to_tsvector('{CONFIG}'::regconfig, translate({{}}, '<>', '  '))"
# How much of a message's text is indexed, as migration 0012 indexes it: a vector holds at most
# 1 MB, and text of distinct words can take 7.5 bytes of it a character ("x-y" of 4-byte letters
# is three words), so 64 Ki characters stay under half of that. It is about 10,000 words of
# prose, within the 16,383 word positions a vector tells apart.
INDEXED_CHARS = 65_536
PAGE_SIZE = 20
MAX_LENGTH = 200  # characters of a query, as the API's q allows


def clean(text: str) -> str:
    # PostgreSQL refuses NUL in text; nobody types it.
    return text.replace("\x00", "").strip()[:MAX_LENGTH]


_LAST_WORD = re.compile(r"(\w+)$")
_TRAILING_OR = re.compile(r"\sor\s+$", re.IGNORECASE)


def tsquery(text: str) -> tuple[str, list[Any]]:
    """SQL for the tsquery of `text`, and its parameters: websearch_to_tsquery of what was
    typed, with the last word as a prefix unless it is quoted or negated ("-word")."""
    last = _LAST_WORD.search(text)
    before = text[: last.start()] if last else text
    if not last or before.count('"') % 2 or before.endswith("-"):
        if not re.search(r"\w", text):  # only punctuation: nothing to look for
            return "''::tsquery", []
        return "websearch_to_tsquery(%s::regconfig, %s)", [CONFIG, text]
    # \w only: nothing in it is tsquery syntax, and the parser splits it as it did the text.
    prefix, prefix_params = "to_tsquery(%s::regconfig, %s)", [CONFIG, f"'{last.group(1)}':*"]
    either = _TRAILING_OR.search(before)
    head, operator = (before[: either.start()], "||") if either else (before, "&&")
    if not re.search(r"\w", head):
        return prefix, prefix_params
    # websearch_to_tsquery binds AND tighter than OR, and so does tsquery's && and ||.
    sql = f"(websearch_to_tsquery(%s::regconfig, %s) {operator} {prefix})"
    return sql, [CONFIG, head, *prefix_params]


def contains_terms(text: str) -> list[str]:
    """The words of `text` for a contains query: split at spaces, quotes and a leading - dropped."""
    words = [w.strip('"').lstrip("-") for w in text.split()]
    return [w for w in words if w] or [text]

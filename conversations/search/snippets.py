"""Snippets: the titles and messages of a page of results, escaped, with the matches in <mark>.
A message's snippet is cut from its plain text (services.plain: its Markdown without the syntax), at
word boundaries: by ts_headline on PostgreSQL; elsewhere in Python, around the first match."""

from __future__ import annotations

import re
import secrets

from django.db import connections
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from conversations.search.query import CONFIG, contains_terms, tsquery
from conversations.services.plain import plain_text


def highlight(
    text: str, titles: list[str], messages: dict[int, str]
) -> tuple[list[SafeString], dict[int, SafeString]]:
    """Each title, whole, and each message's plain text (by id), around its best match."""
    if not text:  # only filters: nothing to mark, and no message was matched
        return [escape(t) for t in titles], {}
    messages = {pk: plain_text(content) for pk, content in messages.items()}
    if connections["default"].vendor == "postgresql":
        every = headlines(text, titles, list(messages.values()))
        return every[: len(titles)], dict(zip(messages, every[len(titles) :], strict=True))
    words = contains_terms(text)
    return (
        [marked(t, words, around=None) for t in titles],
        {pk: marked(content, words, around=160) for pk, content in messages.items()},
    )


def headlines(text: str, titles: list[str], messages: list[str]) -> list[SafeString]:
    """ts_headline of each title (all of it) and message (its best passage), escaped, with the
    matches in <mark>. For the page shown only: it parses each text again."""
    if not titles and not messages:
        return []
    q, q_params = tsquery(text)
    # Markers no text will hold: ts_headline puts them around matches, and they become <mark>
    # once the text is escaped.
    start, stop = f"S{secrets.token_hex(8)}", f"E{secrets.token_hex(8)}"
    marks = f"StartSel={start}, StopSel={stop}"
    options = [f"{marks}, HighlightAll=true"] * len(titles)
    options += [f"{marks}, MaxWords=24, MinWords=10"] * len(messages)
    # The text is escaped before ts_headline sees it: given raw text, its parser drops
    # anything shaped like an HTML tag ("<script>") from the snippet.
    sql = f"""
        SELECT ts_headline('{CONFIG}'::regconfig,
            replace(replace(replace(document, '&', '&amp;'), '<', '&lt;'), '>', '&gt;'), {q},
            options)
        FROM unnest(%s::text[], %s::text[]) WITH ORDINALITY AS d(document, options, n)
        ORDER BY n
    """
    with connections["default"].cursor() as cursor:
        cursor.execute(sql, [*q_params, [*titles, *messages], options])
        rows = [row[0] for row in cursor.fetchall()]
    # Escaped already; < and > again all the same, so that only the <mark>s are markup.
    return [
        mark_safe(  # escaped text and our own <mark>s
            row.replace("<", "&lt;").replace(">", "&gt;")
            .replace(start, "<mark>").replace(stop, "</mark>")
        )
        for row in rows
    ]  # fmt: skip


def marked(text: str, words: list[str], *, around: int | None) -> SafeString:
    """`text` escaped with `words` in <mark>; with `around`, only that many characters near
    the first match."""
    pattern = re.compile("|".join(re.escape(w) for w in sorted(words, key=len, reverse=True)), re.I)
    first = pattern.search(text)
    if around is not None:
        begin = max(0, (first.start() if first else 0) - around // 3)
        if begin:
            begin = text.find(" ", begin) + 1 or begin  # start at a word
        end = min(len(text), begin + around)
        space = text.rfind(" ", begin, end + 1) if end < len(text) else -1
        if space > begin:
            end = space  # end at a word, not inside one
        text = ("…" if begin else "") + text[begin:end].strip() + ("…" if end < len(text) else "")
    pieces: list[str] = []
    last = 0
    for match in pattern.finditer(text):
        pieces += [escape(text[last : match.start()]), f"<mark>{escape(match.group())}</mark>"]
        last = match.end()
    pieces.append(escape(text[last:]))
    return mark_safe("".join(pieces))  # every piece escaped above

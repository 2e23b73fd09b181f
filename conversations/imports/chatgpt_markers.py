"""ChatGPT's inline markers: the private-use characters its replies carry for citations, named
entities and highlighted spans, turned into what ChatGPT's own page shows in their place.

A reply that searched the web holds sequences such as `\ue200cite\ue202turn0search0\ue201` in its
text (U+E200 opens a marker, U+E202 separates its fields, U+E201 closes it), U+E203 and U+E204
around a span it highlights and U+E206 after a sentence's citations. The message's
`metadata.content_references` says what each marker stands for: its `matched_text`, and for a
citation its sources (`items`, each with a title and url). Left in the text they show as boxes,
and one at the start of a line stops a code fence after it from being one.

Here a citation whose sources the export carries becomes numbered links ([1]), its sources listed
at the end of the reply; one without sources is dropped. An entity (`entity`, then a JSON list:
kind, name, ...) becomes its name, a link (`url`, label, address) a Markdown link, and every other
marker and stray marker character is removed.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urlsplit

from django.utils.translation import gettext as _

MARKER = re.compile("\ue200([^\ue200\ue201]*)\ue201")
MARKER_CHARACTERS = re.compile("[\ue200-\ue206]")
SEPARATOR = "\ue202"
# A searched reply starts with a zero-width space: at a line's start it too would stop a fence.
LEADING_ZERO_WIDTH = re.compile("^\u200b+", re.MULTILINE)
# What Markdown would read as markup in a source's title, which is shown as text.
MARKDOWN_PUNCTUATION = re.compile(r"([\\`*_\[\]<>#!|~$&])")
# A url in a Markdown link's <...>: no spaces, angle brackets or control characters in it.
LINKABLE = re.compile(r"[^\s<>\x00-\x1f\x7f]+")
MAX_TITLE = 300
# Citation links at a line's start, right before a code fence on that line: the fence opens the
# line only when they are on a line of their own.
LINKS_BEFORE_FENCE = re.compile(
    r"^((?:\[\\\[\d+\\\]\]\(<[^>\n]*>\))+)( {0,3}(?:```|~~~))", re.MULTILINE
)


def shown(text: str, metadata: dict[str, Any]) -> str:
    """A reply's text with its markers replaced as ChatGPT shows them (see the module)."""
    if not MARKER_CHARACTERS.search(text):
        return text
    references = _sources_by_marker(metadata.get("content_references"))
    numbered: dict[str, tuple[int, str]] = {}  # a source's url: its number and title

    def replaced(match: re.Match[str]) -> str:
        kind, _sep, rest = match.group(1).partition(SEPARATOR)
        if kind in ("cite", "filecite"):
            links = []
            for title, url in references.get(match.group(0), []):
                number = numbered.setdefault(url, (len(numbered) + 1, title))[0]
                links.append(f"[\\[{number}\\]](<{url}>)")
            return "".join(links)
        if kind == "entity":
            return _entity_name(rest)
        if kind == "url":
            label, _sep, url = rest.partition(SEPARATOR)
            return f"[{_escaped(label or url)}](<{url}>)" if _linkable(url) else label
        return ""  # images, navigation lists, products...: nothing of them is imported

    text = MARKER_CHARACTERS.sub("", MARKER.sub(replaced, text))
    text = LINKS_BEFORE_FENCE.sub("\\1\n\\2", LEADING_ZERO_WIDTH.sub("", text))
    if numbered:
        listed = "\n".join(
            f"{number}. [{_escaped(title or url)}](<{url}>)"
            for url, (number, title) in numbered.items()
        )
        text = f"{text.rstrip()}\n\n**{_('Sources')}**\n\n{listed}"
    return text


def _sources_by_marker(references: Any) -> dict[str, list[tuple[str, str]]]:
    """Each citation marker's sources, (title, url), from `metadata.content_references`."""
    found: dict[str, list[tuple[str, str]]] = {}
    if not isinstance(references, list):
        return found
    for reference in references:
        if not isinstance(reference, dict):
            continue
        marker = reference.get("matched_text")
        if not isinstance(marker, str) or not marker.startswith("\ue200"):
            continue
        items = reference.get("items")
        entries = items if isinstance(items, list) and items else [reference]
        sources = []
        for entry in entries:
            if not isinstance(entry, dict):
                continue
            url, title = entry.get("url"), entry.get("title")
            if isinstance(url, str) and _linkable(url):
                title = title if isinstance(title, str) else ""
                sources.append((" ".join(title.split())[:MAX_TITLE], url))
        found.setdefault(marker, sources)
    return found


def _entity_name(rest: str) -> str:
    """An entity marker's name: the second of its JSON list ([kind, name, ...]), or its text."""
    try:
        value = json.loads(rest)
    except (ValueError, RecursionError):
        return rest
    if isinstance(value, list) and len(value) > 1 and isinstance(value[1], str):
        return value[1]
    return value if isinstance(value, str) else ""


def _linkable(url: str) -> bool:
    if not LINKABLE.fullmatch(url):
        return False
    try:
        return urlsplit(url).scheme in ("http", "https")
    except ValueError:
        return False


def _escaped(text: str) -> str:
    return MARKDOWN_PUNCTUATION.sub(r"\\\1", " ".join(text.split()))

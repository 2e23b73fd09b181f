"""Issue 30, problem 8: no user-facing English left unmarked for translation.

Every template under templates/ (the admin's staff-only ones aside) is read through Django's own
template Lexer: what is inside {% translate %} and {% blocktranslate %} is marked, variables and
tags are not text, and what is left is HTML whose text nodes and user-facing attributes (title,
aria-label, placeholder, alt, data-confirm) must hold no words. The scripts get the same check for
the texts they put on the page (textContent, say(), show(), an Error's message)."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from django.conf import settings
from django.template.base import Lexer, TokenType

TEMPLATES = Path(settings.BASE_DIR) / "templates"
SCRIPTS = Path(settings.BASE_DIR) / "static" / "chatsite"
# Names that read the same in every language: the brand and the import formats' products.
NAMES = {"chatsite", "ChatGPT", "Claude", "Open", "WebUI"}
WORD = re.compile(r"[A-Za-z]{2,}")
USER_FACING_ATTRIBUTES = {"title", "aria-label", "placeholder", "alt", "data-confirm"}
PLACEHOLDER = "\x00"  # where a variable or a marked string was: not a letter
# Blocks that hold an element's id (the skip link's target), not text.
ID_BLOCKS = {"skip_target"}
# Code, shown as it is in every language (a curl command line).
CODE_ELEMENTS = {"code", "script", "style"}


def template_paths() -> list[Path]:
    return sorted(
        path
        for path in TEMPLATES.rglob("*")
        if path.is_file() and path.relative_to(TEMPLATES).parts[0] != "admin"
    )


def unmarked_source(source: str) -> str:
    """The template with every marked string, variable and tag taken out: what is left is the
    markup and whatever text nobody marked."""
    kept: list[str] = []
    in_block_translate = in_comment = in_id_block = False
    for token in Lexer(source).tokenize():
        words = token.contents.split() if token.token_type == TokenType.BLOCK else [""]
        command = words[0]
        if command == "block" and words[1:2] and words[1] in ID_BLOCKS:
            in_id_block = True
        elif command == "endblock" and in_id_block:
            in_id_block = False
        elif command == "comment":
            in_comment = True
        elif command == "endcomment":
            in_comment = False
        elif command == "blocktranslate":
            in_block_translate = True
            kept.append(PLACEHOLDER)
        elif command == "endblocktranslate":
            in_block_translate = False
        elif in_comment or in_block_translate or in_id_block:
            continue
        elif token.token_type == TokenType.TEXT:
            kept.append(token.contents)
        elif token.token_type == TokenType.VAR or command == "translate":
            kept.append(PLACEHOLDER)
    return "".join(kept)


class VisibleText(HTMLParser):
    """The text nodes and user-facing attribute values of an HTML fragment."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.pieces: list[str] = []
        self.in_code = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.in_code += tag in CODE_ELEMENTS
        self.pieces.extend(value or "" for name, value in attrs if name in USER_FACING_ATTRIBUTES)

    def handle_endtag(self, tag: str) -> None:
        self.in_code -= tag in CODE_ELEMENTS and self.in_code > 0

    def handle_data(self, data: str) -> None:
        if not self.in_code:
            self.pieces.append(data)


def english_in(text: str) -> list[str]:
    return [word for word in WORD.findall(text) if word not in NAMES]


def unmarked_text(source: str) -> list[str]:
    parser = VisibleText()
    parser.feed(unmarked_source(source))
    parser.close()
    return [piece.strip() for piece in parser.pieces if english_in(piece)]


@pytest.mark.parametrize(
    "path", template_paths(), ids=lambda path: str(path.relative_to(TEMPLATES))
)
def test_problem_8_every_template_string_is_marked_for_translation(path: Path) -> None:
    assert unmarked_text(path.read_text()) == []


def test_problem_8_the_check_finds_unmarked_text_and_passes_marked_text() -> None:
    """The checker itself: it would catch what it is there to catch."""
    assert unmarked_text("<p>Hello there</p>") == ["Hello there"]
    assert unmarked_text('<button title="Close it">&times;</button>') == ["Close it"]
    assert unmarked_text('{% load i18n %}<p>{% translate "Hello" %}</p>') == []
    assert (
        unmarked_text(
            "{% load i18n %}<p>{% blocktranslate %}Hi {{ name }}{% endblocktranslate %}</p>"
        )
        == []
    )
    assert unmarked_text('<p title="{{ title }}">{{ body }} · chatsite</p>') == []
    assert unmarked_text("{# A comment in English #}{% comment %}Another{% endcomment %}") == []
    assert unmarked_text("<p>Run <code>curl -H x</code></p>") == ["Run"]


# A text a script puts on the page: assigned to textContent, or handed to say(), show() (the
# scripts' status helpers) or an Error (whose message the page shows).
SHOWN_STRING = re.compile(
    r"""(?:textContent\s*=|\bsay\(|\bshow\(\s*"[a-z]+"\s*,|new Error\()\s*"""
    r"""(?:[^;"'(){}]*?[?:]\s*)?(["'])(?P<text>(?:(?!\1).)*[A-Za-z]{2,}(?:(?!\1).)*)\1"""
)
# Errors the page never shows as they are: a refused copy shows "Copy failed", a failed page of
# the export shows its HTTP status inside a translated sentence, a failed prompt list nothing.
NEVER_SHOWN = {"copy refused", "HTTP ", "prompts: "}


def unmarked_script_strings(source: str) -> list[str]:
    found = (match["text"] for match in SHOWN_STRING.finditer(source))
    return [text for text in found if text not in NEVER_SHOWN]


@pytest.mark.parametrize("path", sorted(SCRIPTS.glob("*.js")), ids=lambda path: path.name)
def test_problem_8_the_scripts_show_only_translated_text(path: Path) -> None:
    assert unmarked_script_strings(path.read_text()) == []


def test_problem_8_the_script_check_finds_what_is_not_marked() -> None:
    assert unmarked_script_strings('label.textContent = "Copy";') == ["Copy"]
    assert unmarked_script_strings('say("Not attached");') == ["Not attached"]
    assert unmarked_script_strings('show("closed", "Disconnected.");') == ["Disconnected."]
    assert unmarked_script_strings('status.textContent = ok ? "Done." : text;') == ["Done."]
    assert unmarked_script_strings('label.textContent = gettext("Copy");') == []
    assert unmarked_script_strings('show("open", "");') == []
    assert unmarked_script_strings('t.textContent = d.toLocaleString([], { a: "medium" });') == []

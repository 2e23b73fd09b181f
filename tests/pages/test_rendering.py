"""Replies rendered from Markdown: highlighted code, tables and MathML, and nothing that runs.

Model output is untrusted, so each feature is also fed hostile input: whatever the Markdown
holds, the HTML has no script, no event handler, no javascript: URL and no tag outside the
allowlist, and it comes back in bounded time.
"""

from __future__ import annotations

import html
import re
import time
import uuid
from html.parser import HTMLParser
from typing import Any

import pytest
from django.template import Context, Template
from django.test import Client

from conversations.models import Conversation, Message
from conversations.pages.markdown import closed_length, render_markdown, streaming_parts
from conversations.sockets.html_renderer import HtmlRenderer

PYTHON = "```python\ndef add(a, b):\n    return a + b  # the sum\n```\n"
TABLE = "| Engine | Tokens/s |\n|:-------|---------:|\n| vLLM | 95.5 |\n| llama.cpp | 31 |\n"
MATH = "Euler: $e^{i\\pi} + 1 = 0$, and\n\n$$\\sum_{k=1}^{n} k = \\frac{n(n+1)}{2}$$\n"

MATHML = {
    "math", "mrow", "mi", "mn", "mo", "ms", "mtext", "mspace", "msup", "msub", "msubsup",
    "mfrac", "msqrt", "mroot", "mover", "munder", "munderover", "mtable", "mtr", "mtd",
    "mstyle", "mpadded", "mphantom", "menclose",
}  # fmt: skip
ALLOWED_TAGS = {
    "p", "br", "hr", "pre", "code", "span", "div", "blockquote", "em", "strong", "del", "a",
    "ul", "ol", "li", "h1", "h2", "h3", "h4", "h5", "h6",
    "table", "thead", "tbody", "tr", "th", "td", "s", "label", "input",
} | MATHML  # fmt: skip


class Inspected(HTMLParser):
    """Every start tag with its attributes, as a browser's parser would see them."""

    def __init__(self, markup: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.feed(markup)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {name: value or "" for name, value in attrs}))


def assert_inert(markup: str) -> None:
    """Only allowlisted tags; no handler, no script URL, no style but a table cell's alignment.

    (A javascript: link may still show as text, which is harmless.)"""
    for tag, attrs in Inspected(markup).tags:
        assert tag in ALLOWED_TAGS, (tag, markup)
        if tag == "input":  # a task list's checkbox, and only that
            assert attrs.get("type") == "checkbox" and "disabled" in attrs, markup
            assert set(attrs) <= {"type", "disabled", "checked", "class"}, markup
        for name, value in attrs.items():
            assert not name.startswith("on"), (tag, name, markup)
            assert "javascript:" not in value.lower().replace(" ", ""), markup
            assert name not in {"src", "srcset", "xlink:href", "formaction", "action"}, markup
            if name == "href":
                assert tag == "a" and re.match(r"(https?:|mailto:)", value), markup
            if name == "style":
                assert tag in {"th", "td"}, markup
                assert re.fullmatch(r"text-align:(left|right|center)", value), markup


def classes(markup: str, tag: str) -> set[str]:
    found: set[str] = set()
    for name, attrs in Inspected(markup).tags:
        if name == tag:
            found.update(attrs.get("class", "").split())
    return found


def text_of(markup: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", markup))


# -- code -------------------------------------------------------------------------------------


def test_it_highlights_a_python_code_block_and_names_its_language() -> None:
    out = render_markdown(PYTHON)
    assert '<pre class="highlight"><code class="language-python">' in out
    # Pygments' token classes (code.css styles them): keyword, function name, comment.
    assert {"k", "nf", "c1"} <= classes(out, "span")
    assert '<span class="k">def</span>' in out
    # The code's text is exactly what was written: page.js's Copy takes it from <code>.
    assert text_of(out).strip() == "def add(a, b):\n    return a + b  # the sum"
    assert_inert(out)


@pytest.mark.parametrize(
    ("fence", "language"),
    [("```\n", None), ("```nosuchlanguage\n", "nosuchlanguage"), ("~~~ js extra words\n", "js")],
)
def test_it_renders_other_code_as_escaped_text(fence: str, language: str | None) -> None:
    out = render_markdown(f"{fence}if (a < b && c) {{ x = '<b>'; }}\n{fence[:3]}\n")
    assert "&lt;b&gt;" in out and "<b>" not in out
    assert text_of(out).strip() == "if (a < b && c) { x = '<b>'; }"
    code_classes = classes(out, "code")
    assert code_classes == ({f"language-{language}"} if language else set())
    assert_inert(out)


def test_it_keeps_html_inside_highlighted_code_as_text() -> None:
    out = render_markdown("```html\n<svg onload=alert(1)><img src=x onerror=alert(1)>\n```\n")
    assert "nt" in classes(out, "span")  # highlighted as HTML tags...
    assert text_of(out).strip() == "<svg onload=alert(1)><img src=x onerror=alert(1)>"
    assert_inert(out)  # ...and none became one


def test_it_leaves_a_language_name_with_html_in_it_out_of_the_markup() -> None:
    out = render_markdown('```"><script>alert(1)</script>\nx = 1\n```\n')
    assert out == '<pre class="highlight"><code>x = 1\n</code></pre>\n'


def test_it_does_not_highlight_a_huge_block() -> None:
    out = render_markdown("```python\n" + "x = 1\n" * 5_000 + "```\n")
    assert 'class="language-python"' in out and "<span" not in out


# -- tables -----------------------------------------------------------------------------------


def test_it_renders_a_gfm_table_with_its_alignment() -> None:
    out = render_markdown(TABLE)
    tags = [tag for tag, _ in Inspected(out).tags]
    assert tags.count("table") == 1 and tags.count("th") == 2 and tags.count("td") == 4
    assert '<th style="text-align:left">Engine</th>' in out
    assert '<td style="text-align:right">95.5</td>' in out
    assert_inert(out)


# -- math -------------------------------------------------------------------------------------


def test_it_renders_inline_and_display_math_as_mathml() -> None:
    out = render_markdown(MATH)
    maths = [attrs for tag, attrs in Inspected(out).tags if tag == "math"]
    assert [m.get("display") for m in maths] == ["inline", "block"]
    assert {"msup", "mfrac", "munderover"} <= {tag for tag, _ in Inspected(out).tags}
    assert "<mi>π</mi>" in out
    assert "$" not in out
    assert_inert(out)


def test_it_displays_double_dollar_math_inside_a_sentence_without_breaking_the_paragraph() -> None:
    out = render_markdown("The area is $$\\pi r^2$$ for a circle.")
    assert out.startswith("<p>The area is ") and out.rstrip().endswith("for a circle.</p>")
    assert '<math display="block">' in out
    assert "<div" not in out


@pytest.mark.parametrize(
    "text",
    [
        "It costs $5 and $10 with tax.",
        "Between $1,000 and $2,000.",
        "Pay $ 5 now and $ 6 later.",
        "A $20 bill, a $50 bill.",
        "Escaped \\$x\\$ stays.",
    ],
)
def test_it_leaves_dollar_amounts_as_text(text: str) -> None:
    out = render_markdown(text)
    assert "<math" not in out
    assert text_of(out).strip() == text.replace("\\$", "$")


def test_it_shows_math_that_does_not_parse_as_typed() -> None:
    out = render_markdown("Broken: $\\frac{1}{$ and $\\style{x}$.")
    assert "\\style{x}" in text_of(out)
    assert_inert(out)


# -- hostile input ----------------------------------------------------------------------------

HOSTILE = {
    "script tag": "<script>alert(1)</script>",
    "javascript link": "[click](javascript:alert(1)) and <javascript:alert(1)>",
    "data link": "[click](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "image handler": '<img src=x onerror=alert(1)> ![x](x" onerror="alert(1))',
    "svg in code": "```svg\n<svg><script>alert(1)</script></svg>\n```",
    "img in code": "```\n<img src=x onerror=alert(1)>\n```",
    "code span": "`<img src=x onerror=alert(1)>`",
    "table cells": (
        "| <img src=x onerror=alert(1)> | <svg onload=alert(1)> |\n|---|---|\n"
        "| [x](javascript:alert(1)) | $<img src=x onerror=alert(1)>$ |\n"
    ),
    "href in math": "$\\href{javascript:alert(1)}{x}$",
    "img in math": "$<img src=x onerror=alert(1)>$",
    "html in math text": "$\\text{<img src=x onerror=alert(1)><script>alert(1)</script>}$",
    "math in display": "$$\n\\text{</math><img src=x onerror=alert(1)>}\n$$",
    "class in math": "$\\class{x}{y}$ $\\style{color:red}{y}$",
    "language with html": '```"><script>alert(1)</script>\nx\n```',
    "language with a quote": '```a"onmouseover=alert(1)\nx\n```',
    "mathml breakout": "$\\text{</mtext></math><iframe src=javascript:alert(1)>}$",
    "task list": "- [ ] <input type=text onfocus=alert(1) autofocus>\n- [x] [x](javascript:alert(1))",
    "bare url": "javascript:alert(1) www.example.com/<img src=x onerror=alert(1)>",
    "strikethrough": "~~<script>alert(1)</script>~~",
}


@pytest.mark.parametrize("text", HOSTILE.values(), ids=HOSTILE.keys())
def test_it_renders_hostile_markdown_inert(text: str) -> None:
    assert_inert(render_markdown(text))


HUGE = {
    "nested quotes": "> " * 5_000 + "x",
    "nested lists": "".join("  " * i + "- a\n" for i in range(1_000)),
    "open brackets": "[" * 50_000 + "x" + "]" * 50_000,
    "emphasis": "*a " * 30_000,
    "dollars": "$" * 100_000,
    "many formulas": "$x^2$ " * 3_000,
    "nested braces in math": "$" + "{" * 990 + "x" + "}" * 990 + "$",
    "nested fractions": "$" + "\\frac{" * 180 + "x" + "}{y}" * 180 + "$",
    "long code": "```python\n" + "x = [i for i in range(10)]  # c\n" * 20_000 + "```",
    "long table": "|a|b|\n|-|-|\n" + "|$x$|`y`|\n" * 5_000,
    "angle brackets": "<" * 100_000,
}


@pytest.mark.parametrize("text", HUGE.values(), ids=HUGE.keys())
def test_it_renders_deep_or_huge_input_in_bounded_time(text: str) -> None:
    started = time.perf_counter()
    out = render_markdown(text)
    assert time.perf_counter() - started < 5, "rendering took too long"
    assert_inert(out)


# -- through the page -------------------------------------------------------------------------


def test_the_markdown_filter_renders_an_empty_reply_as_nothing() -> None:
    template = Template("{% load chat %}[{{ text|markdown }}]")
    assert template.render(Context({"text": None})) == "[]"
    assert template.render(Context({"text": "$x$"})).startswith("[<p><span class=")


@pytest.mark.django_db
def test_it_shows_alice_her_reply_highlighted_and_refuses_charlie(
    alice: Any, charlie: Any, conversation: Conversation
) -> None:
    Message.objects.create(conversation=conversation, role="user", content="Show me")
    Message.objects.create(
        conversation=conversation,
        role="assistant",
        content=PYTHON + "\n" + TABLE + "\n" + MATH,
        status=Message.Status.COMPLETE,
    )
    client = Client()
    client.force_login(alice)
    page = client.get(conversation.get_absolute_url()).content.decode()
    assert '<code class="language-python"><span class="k">def</span>' in page
    assert '<th style="text-align:left">Engine</th>' in page
    assert '<math display="inline">' in page
    assert "chatsite/code.css" in page

    client.force_login(charlie)
    response = client.get(conversation.get_absolute_url())
    assert response.status_code == 404
    assert "language-python" not in response.content.decode()


# -- while a reply is written: whole blocks rendered, and the block being written as it will be -


@pytest.mark.parametrize(
    ("text", "closed"),
    [
        ("Hello wor", ""),
        ("Hello world.\n", ""),  # a paragraph goes on until a blank line
        ("Hello world.\n\nNext", "Hello world.\n\n"),
        ("```python\nx = 1\n\ny = 2\n", ""),  # a blank line inside code closes nothing
        ("```python\nx = 1\n```\nAfter", "```python\nx = 1\n```\n"),
        ("~~~\na\n```\nb\n~~~\n", "~~~\na\n```\nb\n~~~\n"),  # only its own fence closes it
        ("````\na\n```\n", ""),  # a shorter fence does not close a longer one
        ("One\n\n```\ncode", "One\n\n"),
    ],
)
def test_a_reply_being_written_is_cut_after_its_last_whole_block(text: str, closed: str) -> None:
    assert text[: closed_length(text)] == closed


def test_the_whole_blocks_are_rendered_as_they_will_stay_and_so_is_the_rest() -> None:
    text = "Intro\n\n```python\ndef f(): pass\n```\nIt runs in $O(1)$ <b>time"
    written, writing = streaming_parts(text)
    assert str(written) == str(render_markdown(text[: closed_length(text)]))
    assert 'class="language-python"' in written and "It runs" not in written
    assert writing == render_markdown("It runs in $O(1)$ <b>time")  # escaped: &lt;b&gt;


def test_a_hostile_reply_being_written_stays_inert() -> None:
    for text in HOSTILE_STREAMS:
        written, writing = streaming_parts(text)
        assert_inert(str(written))
        assert_inert(str(writing))


HOSTILE_STREAMS = [
    "<script>alert(1)</script>\n\nmore",
    "```\n<img src=x onerror=alert(1)>\n```\nafter",
    "[x](javascript:alert(1))\n\n$\\href{javascript:alert(1)}{x}$",
    # The block being written, completed for its render: still nothing that runs.
    "```html\n<svg onload=alert(1)><img src=x onerror=alert(1)>",
    "| <img src=x onerror=alert(1)> | b |\n|--",
    "**<script>alert(1)</script>",
    "[x](javascript:alert(1)",
    "`<img src=x onerror=alert(1)>",
    "- [ ] <input onfocus=alert(1) autofocus>",
]


def test_a_tab_re_renders_the_body_only_when_a_block_is_completed() -> None:
    renderer = HtmlRenderer(uuid.uuid4(), frame_bytes=512 * 1024)
    renderer.snapshot(7, "Intro")
    (grown,) = renderer.delta(7, 5, " goes **on")
    # The block being written alone, as it will be (bold already): the body is left as it is.
    # With the length of the text so far, which the page counts as what it was shown.
    assert grown.startswith('<div id="msg-7-writing" hx-swap-oob="innerHTML" data-chars="15">')
    assert "<p>Intro goes <strong>on</strong></p>" in grown and "msg-7-body" not in grown
    (rewritten,) = renderer.delta(7, 15, "**.\n\nNext")
    assert 'id="msg-7-body" hx-swap-oob="innerHTML"' in rewritten
    assert "<p>Intro goes <strong>on</strong>.</p>" in rewritten
    assert (
        '<div id="msg-7-writing" class="writing markdown" data-chars="24" data-total="24"><p>Next</p>'
        in rewritten
    )

"""Model output is untrusted: replies are rendered from Markdown, then sanitized.

CommonMark as people expect it from chat: a single line break kept (`breaks`), bare URLs made
links (linkify), GFM tables, `~~strikethrough~~` and task lists (disabled checkboxes); fenced code highlighted by Pygments (spans with its short token
classes, styled by static/chatsite/code.css); `$...$` and `$$...$$` turned into MathML by
latex2mathml, which browsers lay out natively. Raw HTML in the Markdown is off, so every tag
comes from these renderers; nh3 then keeps only the tags, attributes and classes they produce.
"""

import functools
import re
from collections.abc import Sequence
from typing import Any

import latex2mathml.converter
import nh3
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt
from markdown_it.token import Token
from mdit_py_plugins.dollarmath import dollarmath_plugin
from mdit_py_plugins.tasklists import tasklists_plugin
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.token import STANDARD_TYPES
from pygments.util import ClassNotFound

from conversations.pages.unfinished import as_finished, closed_length, open_code

__all__ = ["closed_length", "render_markdown", "render_writing", "streaming_parts"]

# Past these sizes a block is shown as plain text: highlighting and math conversion are
# per-message CPU on every page load, and an adversarial reply should not make that unbounded.
MAX_HIGHLIGHTED_CHARS = 20_000
MAX_MATH_CHARS = 2_000

# A fence's info string is free text; only a plain name becomes a class (page.js shows it).
_LANGUAGE_NAME = re.compile(r"[A-Za-z0-9_+#.-]{1,40}")
_formatter = HtmlFormatter(nowrap=True)


def _highlight_code(code: str, language: str, _attrs: str) -> str:
    """A fence's HTML: `<pre class="highlight"><code class="language-x">` and Pygments' spans."""
    name = language if _LANGUAGE_NAME.fullmatch(language) else ""
    body: str = escape(code)
    if name and len(code) <= MAX_HIGHLIGHTED_CHARS:
        try:
            # stripnl off: the code's text (what Copy takes) stays exactly as written.
            lexer = get_lexer_by_name(name, stripnl=False)
        except ClassNotFound:
            pass
        else:
            body = highlight(code, lexer, _formatter)
    if not name:
        return format_html('<pre class="highlight"><code>{}</code></pre>', mark_safe(body))
    return format_html(
        '<pre class="highlight"><code class="language-{}">{}</code></pre>', name, mark_safe(body)
    )


def _math(latex: str, options: dict[str, Any]) -> str:
    """MathML for one formula; as typed (escaped) when it is too long or does not parse."""
    display = bool(options.get("display_mode"))
    if len(latex) <= MAX_MATH_CHARS:
        try:
            return latex2mathml.converter.convert(latex, display="block" if display else "inline")
        except Exception:  # latex2mathml raises many kinds; deep nesting is a RecursionError.
            pass
    return escape(f"$${latex}$$" if display else f"${latex}$")


# "commonmark" with raw HTML off: a model that writes <script> gets it shown as text.
_markdown = MarkdownIt(
    "commonmark",
    {"html": False, "breaks": True, "linkify": True, "highlight": _highlight_code},
).enable(["table", "strikethrough", "linkify"])
# The checkbox in its <label> names it (axe's "label" rule); disabled: a reply is not a form.
tasklists_plugin(_markdown, enabled=False, label=True)
# "$5 and $10" stays text: no space inside the dollars, no digit right after the closing one.
dollarmath_plugin(
    _markdown,
    allow_space=False,
    allow_digits=False,
    allow_labels=False,
    double_inline=True,
    renderer=_math,
)


def _math_inline_double(
    renderer: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any
) -> str:
    # `$$...$$` inside a sentence: displayed, but in a span (the plugin's <div> would split the <p>).
    formula = _math(tokens[idx].content.strip(), {"display_mode": True})
    return format_html('<span class="math display">{}</span>', mark_safe(formula))


_markdown.add_render_rule("math_inline_double", _math_inline_double)

_MATHML_TAGS = {
    "math", "mrow", "mi", "mn", "mo", "ms", "mtext", "mspace", "msup", "msub", "msubsup",
    "mfrac", "msqrt", "mroot", "mover", "munder", "munderover", "mtable", "mtr", "mtd",
    "mstyle", "mpadded", "mphantom", "menclose",
}  # fmt: skip
# Presentation only: no href, no style, no event handlers.
_MATHML_ATTRIBUTES = {
    "mathvariant", "mathsize", "mathcolor", "mathbackground", "stretchy", "fence", "separator",
    "accent", "largeop", "movablelimits", "form", "lspace", "rspace", "minsize", "maxsize",
    "width", "height", "depth", "voffset", "linethickness", "displaystyle", "scriptlevel",
    "notation", "columnalign", "columnspacing", "rowspacing",
}  # fmt: skip

_HTML_TAGS = {
    "p", "br", "hr", "pre", "code", "span", "div", "blockquote", "em", "strong", "del", "s", "a",
    "ul", "ol", "li", "h1", "h2", "h3", "h4", "h5", "h6",
    "table", "thead", "tbody", "tr", "th", "td", "label", "input",
}  # fmt: skip

_cleaner = nh3.Cleaner(
    tags=_HTML_TAGS | _MATHML_TAGS,
    attributes={
        "a": {"href", "title"},
        "code": {"class"},  # language-<name>, checked by _LANGUAGE_NAME
        "th": {"style"},  # GFM alignment: text-align only (filter_style_properties)
        "td": {"style"},
        **{tag: _MATHML_ATTRIBUTES for tag in _MATHML_TAGS - {"math"}},
    },
    tag_attribute_values={
        "math": {"display": {"block", "inline"}},
        # A task list's checkbox, and nothing else an <input> could be.
        "input": {"type": {"checkbox"}, "checked": {"checked"}},
    },
    set_tag_attribute_values={"input": {"disabled": "disabled"}},
    allowed_classes={
        "ul": {"contains-task-list"},
        "li": {"task-list-item"},
        "input": {"task-list-item-checkbox"},
        "pre": {"highlight"},
        "span": set(STANDARD_TYPES.values()) - {""} | {"math", "inline", "display"},
        "div": {"math", "block"},
    },
    filter_style_properties={"text-align"},
    url_schemes={"http", "https", "mailto"},
    link_rel="noopener noreferrer nofollow",
)


def render_markdown(text: str) -> SafeString:
    return mark_safe(_cleaner.clean(_markdown.render(text)))


# Past this size the block being written is shown as text (as the text of a reply too long for a
# socket frame is): it is rendered again for every frame until it is whole.
MAX_RENDERED_WRITING_CHARS = 20_000
# A code block being written is highlighted in parts of at most this many lines (_open_code_box).
CODE_PART_LINES = 16


@functools.lru_cache(maxsize=64)  # a few replies' latest blocks: each tab asks for the same one
def render_writing(block: str) -> SafeString | str:
    """The block being written, rendered as it will be once whole (see pages.unfinished); past
    MAX_RENDERED_WRITING_CHARS, the text itself (the template escapes it). Cached: every tab of
    the process is sent the same block."""
    if len(block) > MAX_RENDERED_WRITING_CHARS:
        return block
    code = open_code(block)
    if code is None:
        return render_markdown(as_finished(block)) if block.strip() else SafeString("")
    before, info, text = code
    head = render_markdown(as_finished(before)) if before.strip() else ""
    return mark_safe(head + _cleaner.clean(_open_code_box(info, text)) + "\n")


def _open_code_box(info: str, code: str) -> str:
    """A code block being written, as markdown-it will render it once closed, but highlighted
    in parts (_parts), each part once: highlighting the whole for every frame would cost more
    with every line. (A part is lexed on its own, so a string with blank
    lines in it may change colour when the block closes; its text and layout do not change.)"""
    language = info.split(maxsplit=1)[0] if info.strip() else ""
    name = language if _LANGUAGE_NAME.fullmatch(language) else ""
    if not name or not code or len(code) > MAX_HIGHLIGHTED_CHARS:
        return _highlight_code(code, language, "")
    body = "".join(_highlighted_part(name, part) for part in _parts(code))
    return format_html(
        '<pre class="highlight"><code class="language-{}">{}</code></pre>', name, mark_safe(body)
    )


def _parts(code: str) -> list[str]:
    """The code in parts that stay the same as it grows: each ends at a blank line, or after
    CODE_PART_LINES lines."""
    parts: list[str] = []
    lines: list[str] = []
    for line in code.splitlines(keepends=True):
        lines.append(line)
        if len(lines) == CODE_PART_LINES or not line.strip():
            parts.append("".join(lines))
            lines = []
    return [*parts, "".join(lines)] if lines else parts


@functools.lru_cache(maxsize=1024)
def _highlighted_part(name: str, code: str) -> str:
    try:
        lexer = get_lexer_by_name(name, stripnl=False)
    except ClassNotFound:
        return escape(code)
    highlighted: str = highlight(code, lexer, _formatter)
    return highlighted


@functools.lru_cache(maxsize=256)
def streaming_parts(text: str) -> tuple[SafeString, SafeString | str]:
    """A reply being written: its whole blocks rendered as Markdown, as they will be when it
    ends (so nothing moves then), and the block being written (render_writing). Cached: every
    tab of the process shows the same reply."""
    cut = closed_length(text)
    return (render_markdown(text[:cut]) if cut else SafeString(""), render_writing(text[cut:]))

"""Model output is untrusted: finished replies are rendered from Markdown, then sanitized.

CommonMark with GFM tables; fenced code highlighted by Pygments (spans with its short token
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
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.token import STANDARD_TYPES
from pygments.util import ClassNotFound

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
    "commonmark", {"html": False, "linkify": False, "highlight": _highlight_code}
).enable("table")
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
    "p", "br", "hr", "pre", "code", "span", "div", "blockquote", "em", "strong", "del", "a",
    "ul", "ol", "li", "h1", "h2", "h3", "h4", "h5", "h6",
    "table", "thead", "tbody", "tr", "th", "td",
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
    tag_attribute_values={"math": {"display": {"block", "inline"}}},
    allowed_classes={
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


# A fence opens or closes a code block: three or more backticks or tildes, at most three spaces in.
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")


def closed_length(text: str) -> int:
    """How much of a reply being written is whole blocks: up to its last blank line outside a
    code block, or the end of its last closed code block. Those blocks are rendered as they will
    be at the end; the rest is still being written."""
    closed = 0
    fence = ""  # the fence of the open code block, if any
    position = 0
    for line in text.splitlines(keepends=True):
        position += len(line)
        if not line.endswith("\n"):
            break  # the line being written
        opener = _FENCE.match(line)
        if fence:
            if (
                opener is not None
                and opener.group(1)[0] == fence[0]
                and len(opener.group(1)) >= len(fence)
                and not line[opener.end() :].strip()
            ):
                fence = ""
                closed = position
        elif opener:
            fence = opener.group(1)
        elif not line.strip():
            closed = position
    return closed


@functools.lru_cache(maxsize=256)
def streaming_parts(text: str) -> tuple[SafeString, str]:
    """A reply being written: its whole blocks rendered as Markdown, as they will be when it
    ends (so nothing moves then), and the block being written, as text. Cached: every tab of
    the process shows the same reply."""
    cut = closed_length(text)
    return (render_markdown(text[:cut]) if cut else SafeString(""), text[cut:])

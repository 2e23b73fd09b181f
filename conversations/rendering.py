"""Model output is untrusted: finished replies are rendered from Markdown, then sanitized."""

import nh3
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

# "commonmark" with raw HTML off: a model that writes <script> gets it shown as text.
_markdown = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")

_ALLOWED_TAGS = {
    "p", "br", "hr", "pre", "code", "blockquote", "em", "strong", "del", "a",
    "ul", "ol", "li", "h1", "h2", "h3", "h4", "h5", "h6",
    "table", "thead", "tbody", "tr", "th", "td",
}  # fmt: skip


def render_markdown(text: str) -> SafeString:
    html = _markdown.render(text)
    cleaned = nh3.clean(
        html,
        tags=_ALLOWED_TAGS,
        attributes={"a": {"href", "title"}, "code": {"class"}},
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )
    return mark_safe(cleaned)

from django import template
from django.utils.safestring import SafeString

from conversations.rendering import render_markdown, streaming_parts

register = template.Library()


@register.filter(name="markdown")
def markdown_filter(text: str) -> SafeString:
    return render_markdown(text or "")


@register.filter(name="streaming_parts")
def streaming_parts_filter(text: str) -> tuple[SafeString, str]:
    """(the whole blocks as HTML, the block being written as text) of a reply being written."""
    return streaming_parts(text or "")

from django import template
from django.utils.safestring import SafeString

from conversations.rendering import render_markdown

register = template.Library()


@register.filter(name="markdown")
def markdown_filter(text: str) -> SafeString:
    return render_markdown(text or "")

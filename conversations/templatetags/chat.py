from datetime import date, datetime, timedelta

from django import template
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _

from conversations.imports.source import UNFINISHED_AT_SOURCE
from conversations.models import Message
from conversations.pages.markdown import render_markdown, streaming_parts

register = template.Library()


@register.filter(name="markdown")
def markdown_filter(text: str) -> SafeString:
    return render_markdown(text or "")


@register.filter(name="streaming_parts")
def streaming_parts_filter(text: str) -> tuple[SafeString, SafeString | str, bool]:
    """(the whole blocks as HTML, the block being written, whether that block is rendered or,
    too long to render for every frame, text) of a reply being written."""
    written, writing = streaming_parts(text or "")
    return written, writing, isinstance(writing, SafeString)


@register.filter(name="interruption")
def interruption(message: Message) -> str:
    """An interrupted reply's marker: the server stopped while writing it, or (imported) its
    source holds it unfinished."""
    if message.error == UNFINISHED_AT_SOURCE:
        return _("Interrupted: it was not finished where it was exported from.")
    return _("Interrupted: the server stopped while writing this reply.")


@register.filter(name="date_group")
def date_group(moment: datetime) -> str:
    """The sidebar's heading for a conversation last active at `moment`."""
    return date_group_on(timezone.localdate(moment), today=timezone.localdate())


def date_group_on(day: date, *, today: date) -> str:
    """The heading for a conversation last active on `day`, seen on `today`."""
    if day >= today:
        return _("Today")
    if day == today - timedelta(days=1):
        return _("Yesterday")
    if day > today - timedelta(days=7):
        return _("Previous 7 days")
    if day > today - timedelta(days=30):
        return _("Previous 30 days")
    # Older history by month this year, then by year: an imported year of chats is not one heap.
    if day.year == today.year:
        return date_format(day, "F")
    return str(day.year)

"""The sidebar's search (conversations.search): results as you type, and the way to a result.

The box is a plain GET form: htmx sends it as the user types and puts the results above the
list, which they hide (an empty answer brings the list back); without JavaScript, submitting it
renders the page with the results in the sidebar.
"""

from __future__ import annotations

from contextlib import suppress

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from conversations import search
from conversations.models import Conversation, Message
from conversations.pages.chat import sidebar_page
from conversations.pages.htmx import HtmxRequest
from conversations.services import branches
from conversations.services.errors import SendRefused
from conversations.types import AuthenticatedHttpRequest, MessageId


class SearchForm(forms.Form):
    q = forms.CharField(required=False, max_length=search.MAX_LENGTH)
    page = forms.IntegerField(required=False, min_value=1, max_value=1000)


@login_required
@require_GET
def conversation_search(request: HtmxRequest) -> HttpResponse:
    form = SearchForm(request.GET)
    if not form.is_valid():
        errors = " ".join(str(e) for field in form.errors.values() for e in field)
        return HttpResponse(errors, status=400, content_type="text/plain; charset=utf-8")
    query = form.cleaned_data["q"]
    page = form.cleaned_data["page"] or 1
    error = ""
    try:
        results = search.search(request.user, query, page=page)
    except search.FilterError as exc:
        results, error = search.Results([], False), str(exc)
    context = {
        "search": {"query": query, "results": results, "next_page": page + 1, "error": error}
    }
    if request.htmx:
        if not query:
            return HttpResponse("")  # no results: the sidebar shows its list again
        template = "_search_results.html" if page == 1 or error else "_search_hits.html"
        # A bad filter is answered 200 all the same: htmx swaps in only a success, and the
        # box's status line is where the user reads what to change as they type.
        return render(request, f"conversations/{template}", context)
    if not query:
        return redirect("conversation-list")
    # The page as the list's, with the results in its sidebar (the list's first page below).
    return render(
        request,
        "conversations/list.html",
        {"sidebar": sidebar_page(request, 1), **context},
        status=400 if error else 200,
    )


@login_required
@require_POST
def search_show_message(request: AuthenticatedHttpRequest, message_id: MessageId) -> HttpResponse:
    """A result on another version of its turn: show the branch through it, as the version
    arrows would, and go to it. While a reply is being written the branch cannot change (every
    tab follows the reply), and the conversation opens as it is."""
    message = get_object_or_404(
        Message.objects.filter(conversation__in=Conversation.objects.visible_to(request.user)),
        pk=message_id,
    )
    conversation = message.conversation
    with suppress(SendRefused):
        branches.branch_select(conversation=conversation, message_id=message.pk)
    return redirect(f"{conversation.get_absolute_url()}#msg-{message.pk}")

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.paginator import Page, Paginator
from django.http import HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from conversations.forms import TitleForm
from conversations.models import Conversation
from conversations.services.conversations import (
    conversation_create,
    conversation_delete,
    conversation_rename,
)
from conversations.services.errors import TooManyConversations
from conversations.services.limits import check_create_allowed
from conversations.types import AuthenticatedHttpRequest, ConversationId

SIDEBAR_PAGE_SIZE = 50


@login_required
@require_GET
def conversation_list(request: AuthenticatedHttpRequest) -> HttpResponse:
    return render(request, "conversations/list.html", {"sidebar": _sidebar_page(request, 1)})


@login_required
@require_GET
def conversation_sidebar_page(request: AuthenticatedHttpRequest) -> HttpResponse:
    """The next page of the sidebar, loaded by its "Older conversations" button (htmx)."""
    page = _sidebar_page(request, request.GET.get("page", 1))
    return render(request, "conversations/_sidebar_page.html", {"sidebar": page})


def _sidebar_page(request: AuthenticatedHttpRequest, number: int | str) -> Page[Conversation]:
    # A page at a time: a user with thousands of conversations still gets a small, fast page.
    conversations = Conversation.objects.visible_to(request.user).newest_first()
    return Paginator(conversations, SIDEBAR_PAGE_SIZE).get_page(number)


@login_required
@require_POST
def conversation_new(request: AuthenticatedHttpRequest) -> HttpResponse:
    try:
        check_create_allowed(request.user)
    except TooManyConversations as refused:
        response = render(
            request,
            "conversations/list.html",
            {"sidebar": _sidebar_page(request, 1), "error": str(refused)},
            status=429,
        )
        response["Retry-After"] = str(refused.retry_after)
        return response
    conversation = conversation_create(owner=request.user)
    return redirect(conversation)


@login_required
@require_GET
def conversation_detail(
    request: AuthenticatedHttpRequest, conversation_id: ConversationId
) -> HttpResponse:
    conversation = get_object_or_404(
        Conversation.objects.visible_to(request.user), pk=conversation_id
    )
    messages = list(conversation.messages.all())
    return render(
        request,
        "conversations/detail.html",
        {
            "conversation": conversation,
            "sidebar": _sidebar_page(request, 1),
            "messages": messages,
            "streaming": any(m.is_active for m in messages),
            "max_prompt_chars": settings.CHAT_MAX_PROMPT_CHARS,
        },
    )


@login_required
@require_POST
def conversation_rename_view(
    request: AuthenticatedHttpRequest, conversation_id: ConversationId
) -> HttpResponse:
    conversation = get_object_or_404(
        Conversation.objects.visible_to(request.user), pk=conversation_id
    )
    form = TitleForm(request.POST)
    if form.is_valid():
        conversation_rename(conversation=conversation, title=form.cleaned_data["title"])
    elif request.POST.get("title", "").strip():  # an empty title changes nothing, as before
        return HttpResponseBadRequest(" ".join(str(e) for e in form.errors["title"]))
    return redirect(conversation)


@login_required
@require_POST
def conversation_delete_view(
    request: AuthenticatedHttpRequest, conversation_id: ConversationId
) -> HttpResponse:
    conversation = get_object_or_404(
        Conversation.objects.visible_to(request.user), pk=conversation_id
    )
    conversation_delete(conversation=conversation)
    return redirect("conversation-list")

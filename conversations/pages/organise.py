"""A conversation's organising actions (pin, archive, move to a project), from its menu or the
sidebar, and the Archive page that lists the archived ones."""

import uuid
from collections.abc import Callable

from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from conversations.models import Conversation, Project
from conversations.pages.chat import sidebar_page
from conversations.services.conversations import conversation_or_404
from conversations.services.projects import (
    conversation_archive,
    conversation_move,
    conversation_pin,
)
from conversations.types import AuthenticatedHttpRequest, ConversationId

ARCHIVE_PAGE_SIZE = 50


def _back(request: AuthenticatedHttpRequest, conversation: Conversation) -> HttpResponse:
    """Back to the page the form was on (`next`, if it is this site's), else the conversation."""
    back = request.POST.get("next", "")
    if url_has_allowed_host_and_scheme(
        back, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return redirect(back)
    return redirect(conversation)


def _flag(request: AuthenticatedHttpRequest) -> bool | None:
    value = request.POST.get("value", "")
    return {"1": True, "0": False}.get(value)


@login_required
@require_POST
def conversation_pin_view(
    request: AuthenticatedHttpRequest, conversation_id: ConversationId
) -> HttpResponse:
    return _flagged(
        request,
        conversation_id,
        lambda conversation, pinned: conversation_pin(conversation=conversation, pinned=pinned),
        "Say value=1 to pin it or value=0 to unpin it.",
    )


@login_required
@require_POST
def conversation_archive_view(
    request: AuthenticatedHttpRequest, conversation_id: ConversationId
) -> HttpResponse:
    return _flagged(
        request,
        conversation_id,
        lambda conversation, archived: conversation_archive(
            conversation=conversation, archived=archived
        ),
        "Say value=1 to archive it or value=0 to restore it.",
    )


def _flagged(
    request: AuthenticatedHttpRequest,
    conversation_id: ConversationId,
    set_flag: Callable[[Conversation, bool], None],
    refusal: str,
) -> HttpResponse:
    """Set one of the user's conversation's flags to the form's `value` (1 or 0), then back."""
    conversation = conversation_or_404(user=request.user, conversation_id=conversation_id)
    value = _flag(request)
    if value is None:
        return HttpResponseBadRequest(refusal)
    set_flag(conversation, value)
    return _back(request, conversation)


# A sidebar row's buttons name their action and carry the conversation's id as its value: one
# form for the whole sidebar (templates/conversations/_row_menu.html) instead of one a row.
ROW_ACTIONS: dict[str, Callable[[Conversation], None]] = {
    "pin": lambda conversation: conversation_pin(conversation=conversation, pinned=True),
    "unpin": lambda conversation: conversation_pin(conversation=conversation, pinned=False),
    "archive": lambda conversation: conversation_archive(conversation=conversation, archived=True),
}


@login_required
@require_POST
def conversation_row_action(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Pin, unpin or archive the conversation a sidebar row's button names."""
    for name, action in ROW_ACTIONS.items():
        if name in request.POST:
            try:
                conversation_id = uuid.UUID(request.POST[name])
            except ValueError:
                break
            conversation = conversation_or_404(user=request.user, conversation_id=conversation_id)
            action(conversation)
            return _back(request, conversation)
    return HttpResponseBadRequest("Say which conversation to pin, unpin or archive.")


@login_required
@require_POST
def conversation_move_view(
    request: AuthenticatedHttpRequest, conversation_id: ConversationId
) -> HttpResponse:
    """Into one of the user's projects (`project`: its id), or out of any (`project` empty)."""
    conversation = conversation_or_404(user=request.user, conversation_id=conversation_id)
    wanted = request.POST.get("project", "")
    project = None
    if wanted:
        if not wanted.isdigit():
            return HttpResponseBadRequest("Choose one of your projects.")
        project = Project.objects.owned_by(request.user).filter(pk=int(wanted)).first()
        if project is None:
            return HttpResponseBadRequest("Choose one of your projects.")
    try:
        conversation_move(conversation=conversation, project=project)
    except ValidationError as refused:
        return HttpResponseBadRequest(" ".join(refused.messages))
    return _back(request, conversation)


@login_required
@require_GET
def archive(request: AuthenticatedHttpRequest) -> HttpResponse:
    """The archived conversations, newest first, a page at a time."""
    archived = Conversation.objects.visible_to(request.user).filter(archived=True).newest_first()
    page = Paginator(archived, ARCHIVE_PAGE_SIZE).get_page(request.GET.get("page", 1))
    return render(
        request,
        "conversations/archive.html",
        {"archive_page": page, "sidebar": sidebar_page(request, 1)},
    )

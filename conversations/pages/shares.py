"""The pages of share links: the public read-only snapshot, and its owner's list of links."""

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from conversations.models import ShareLink
from conversations.services.conversations import conversation_or_404
from conversations.services.shares import (
    TooManyShares,
    share_create,
    share_for_token,
    share_revoke,
    shared_messages,
)
from conversations.types import AuthenticatedHttpRequest, ConversationId


def share_url(request: HttpRequest, token: str) -> str:
    """The absolute link a reader opens."""
    return request.build_absolute_uri(reverse("share-view", kwargs={"token": token}))


@require_GET
def share_view(request: HttpRequest, token: str) -> HttpResponse:
    """The snapshot, read-only: no sidebar, no composer, no socket, nothing of its owner's."""
    # The login comes first, so that a signed-out visitor learns nothing about the token.
    if settings.CHAT_SHARES_REQUIRE_LOGIN and not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    share = share_for_token(token)
    if share is None:
        raise Http404("No such link.")  # unknown and revoked alike
    response = render(
        request,
        "conversations/shared.html",
        {"title": share.title, "shared_at": share.created_at, "messages": shared_messages(share)},
    )
    # A snapshot someone may revoke any time: no cache keeps it, no search engine lists it, and
    # no link in a reply sends its address on as a Referer.
    response["Cache-Control"] = "private, no-store"
    response["X-Robots-Tag"] = "noindex"
    response["Referrer-Policy"] = "no-referrer"
    return response


@never_cache  # the page that shows a new link must not be kept by any cache
@login_required
@require_http_methods(["GET", "POST"])
def conversation_shares(
    request: AuthenticatedHttpRequest, conversation_id: ConversationId
) -> HttpResponse:
    """The conversation's links, with Revoke buttons; a POST makes a new one, shown once (or
    says why not: 429 past CHAT_SHARES_PER_USER live links)."""
    conversation = conversation_or_404(user=request.user, conversation_id=conversation_id)
    created = url = None
    error, status = "", 200
    if request.method == "POST":
        try:
            created, token = share_create(conversation=conversation, created_by=request.user)
            url = share_url(request, token)
        except TooManyShares as refused:
            error, status = str(refused), 429
    return render(
        request,
        "conversations/shares.html",
        {
            "conversation": conversation,
            "shares": ShareLink.objects.owned_by(request.user).filter(conversation=conversation),
            "created": created,
            "url": url,
            "error": error,
            "require_login": settings.CHAT_SHARES_REQUIRE_LOGIN,
        },
        status=status,
    )


@login_required
@require_POST
def share_revoke_view(
    request: AuthenticatedHttpRequest, conversation_id: ConversationId, share_id: int
) -> HttpResponse:
    share = get_object_or_404(
        ShareLink.objects.owned_by(request.user).filter(conversation_id=conversation_id),
        pk=share_id,
    )
    share_revoke(share=share)
    return redirect("conversation-shares", conversation_id=conversation_id)

"""The account page: who you are, your password, the tokens you used (and your budget), where
you are signed in (and signing out of all of it), and a way to your API tokens."""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from conversations.generation.deprovision import SIGNED_OUT, stop_replies_of
from conversations.services import accounts, budgets
from conversations.types import AuthenticatedHttpRequest

logger = logging.getLogger("chatsite.accounts")


@login_required
@require_GET
def account(request: AuthenticatedHttpRequest) -> HttpResponse:
    current = request.session.session_key
    sign_ins = accounts.live_sign_ins(request.user)
    return render(
        request,
        "conversations/account.html",
        {
            "sign_ins": [(s, s.session_key == current) for s in sign_ins],
            "local_password": request.user.has_usable_password(),
            "usage": budgets.usage_of(request.user),
        },
    )


@login_required
@require_POST
def sign_out_everywhere_view(request: AuthenticatedHttpRequest) -> HttpResponse:
    """End every session of the user's, this one too: their sockets close in every process and
    their replies being written stop."""
    user = request.user
    ended = accounts.sign_out_everywhere(user)
    stop_replies_of(user.pk, cancelled_by=SIGNED_OUT)
    logger.info("user %s signed out everywhere: %d sessions", user.pk, ended)
    request.session.flush()  # deleted already; a fresh, empty one for the redirect
    return redirect("login")


class SeenMiddleware:
    """Marks the session of each signed-in request as seen (at most once in a few minutes),
    for the account page's "last seen"."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        accounts.seen(request)
        return self.get_response(request)

"""The account page: who you are, your password, your defaults for new conversations (saved in
place), the tokens you used (and your budget), where you are signed in (and signing out of all of
it), and a way to your API tokens."""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from conversations.engines import catalogue
from conversations.generation.deprovision import SIGNED_OUT, stop_replies_of
from conversations.models import UserPreferences
from conversations.pages.forms import DefaultsForm
from conversations.pages.htmx import HtmxRequest
from conversations.services import accounts, budgets
from conversations.services.preferences import defaults_set
from conversations.types import AuthenticatedHttpRequest

logger = logging.getLogger("chatsite.accounts")


@login_required
@require_GET
def account(request: AuthenticatedHttpRequest) -> HttpResponse:
    return _account_page(request)


def _account_page(
    request: AuthenticatedHttpRequest, defaults_form: DefaultsForm | None = None, status: int = 200
) -> HttpResponse:
    current = request.session.session_key
    sign_ins = accounts.live_sign_ins(request.user)
    return render(
        request,
        "conversations/account.html",
        {
            "sign_ins": [(s, s.session_key == current) for s in sign_ins],
            "local_password": request.user.has_usable_password(),
            "usage": budgets.usage_of(request.user),
            **_defaults_context(request, defaults_form),
        },
        status=status,
    )


def _defaults_context(
    request: AuthenticatedHttpRequest, form: DefaultsForm | None = None, *, saved: bool = False
) -> dict[str, object]:
    if form is None:
        preferences = UserPreferences.objects.filter(user=request.user).first()
        form = DefaultsForm(
            initial={
                "default_model": preferences.default_model_slug if preferences else "",
                "default_instructions": preferences.default_instructions if preferences else "",
            }
        )
    return {
        "defaults_form": form,
        "defaults_saved": saved,
        "default_model_choices": catalogue.models_for(request.user),
    }


@login_required
@require_POST
def account_defaults_view(request: HtmxRequest) -> HttpResponse:
    """Saves the defaults for new conversations: in place for htmx (the form comes back saying
    "Saved", or with its fields' errors), else by a page load."""
    form = DefaultsForm(request.POST)
    if form.is_valid():
        try:
            defaults_set(
                user=request.user,
                model_slug=form.cleaned_data["default_model"],
                instructions=form.cleaned_data["default_instructions"],
            )
        except ValidationError as exc:
            for name, errors in exc.message_dict.items():
                form.add_error(name, errors)
    if not form.is_valid():
        # 200 for htmx, which swaps in only successful responses by default.
        if request.htmx:
            context = _defaults_context(request, form)
            return render(request, "conversations/_defaults_form.html", context)
        return _account_page(request, form, status=400)
    if request.htmx:
        return render(
            request, "conversations/_defaults_form.html", _defaults_context(request, saved=True)
        )
    return redirect("account")


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

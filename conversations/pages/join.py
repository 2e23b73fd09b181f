"""Joining: the page an invitation link opens, and sign-up where CHAT_OPEN_SIGNUP allows it.

The person chooses a username and a password (Django's password validators apply), is signed
in, and lands in the chat.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import login
from django.contrib.auth.forms import UserCreationForm
from django.db import IntegrityError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods

from conversations.services import password_login
from conversations.services.invitations import (
    InvitationUnusable,
    invitation_accept,
    invitation_for,
    sign_up,
)


class JoinForm(UserCreationForm):  # type: ignore[type-arg]
    """A username (not taken, whatever its case) and a password twice, validated as Django's
    admin validates them; the account itself is made by the service."""

    def save(self, commit: bool = True) -> Any:
        raise NotImplementedError("accounts are made by conversations.services.invitations")


@require_http_methods(["GET", "POST"])
def join(request: HttpRequest, token: str) -> HttpResponse:
    try:
        invitation = invitation_for(token)
    except InvitationUnusable as exc:
        return render(request, "conversations/join.html", {"refused": str(exc)}, status=410)
    form = JoinForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            user = invitation_accept(
                token=token,
                username=form.cleaned_data["username"],
                password=form.cleaned_data["password1"],
            )
        except InvitationUnusable as exc:  # taken by someone else meanwhile
            return render(request, "conversations/join.html", {"refused": str(exc)}, status=410)
        except IntegrityError:  # the username, taken meanwhile
            form.add_error("username", _("That username was just taken. Choose another."))
        else:
            login(request, user, backend=password_login.BACKEND)
            return redirect("conversation-list")
    groups = [group.name for group in invitation.groups.all()]
    return render(request, "conversations/join.html", {"form": form, "groups": groups})


@require_http_methods(["GET", "POST"])
def signup(request: HttpRequest) -> HttpResponse:
    if not settings.CHAT_OPEN_SIGNUP:
        raise Http404("Accounts are made by invitation here.")
    form = JoinForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            user = sign_up(
                username=form.cleaned_data["username"], password=form.cleaned_data["password1"]
            )
        except IntegrityError:
            form.add_error("username", _("That username was just taken. Choose another."))
        else:
            login(request, user, backend=password_login.BACKEND)
            return redirect("conversation-list")
    return render(request, "conversations/join.html", {"form": form, "signup": True})

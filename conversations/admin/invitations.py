"""Invitations in the admin: staff who may add them make a link for one person; the link is
shown once, in the page's message, as only its hash is stored."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone

from conversations.models import Invitation
from conversations.services.invitations import invitation_create


class InvitationForm(forms.ModelForm):  # type: ignore[type-arg]
    days = forms.IntegerField(
        min_value=1, max_value=90, help_text="How many days the link works (once)."
    )

    class Meta:
        model = Invitation
        fields = ["note", "groups"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["days"].initial = settings.CHAT_INVITATION_DAYS


@admin.register(Invitation)
class InvitationAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    form = InvitationForm
    list_display = ["__str__", "state", "created_by", "created_at", "expires_at", "used_by"]
    readonly_fields = ["created_by", "created_at", "expires_at", "used_at", "used_by"]

    def get_fields(self, request: HttpRequest, obj: Invitation | None = None) -> Any:
        if obj is None:
            return ["note", "groups", "days"]
        return ["note", "groups", *self.readonly_fields]

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # an invitation is made, used or left to expire; deleting revokes it

    def save_model(self, request: HttpRequest, obj: Invitation, form: Any, change: bool) -> None:
        invitation, token = invitation_create(
            created_by=request.user,  # type: ignore[arg-type]
            groups=form.cleaned_data["groups"],  # with the row, so its audit row names them
            note=form.cleaned_data["note"],
            days=form.cleaned_data["days"],
        )
        obj.pk, obj.expires_at = invitation.pk, invitation.expires_at
        link = request.build_absolute_uri(reverse("join", args=[token]))
        messages.warning(
            request,
            f"The invitation's link, shown only now: {link} — it works once, until "
            f"{timezone.localtime(invitation.expires_at):%Y-%m-%d %H:%M}.",
        )

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        pass  # save_model made the row with its groups (the form's own instance is never saved)

    def state(self, invitation: Invitation) -> str:
        return invitation.state

"""The prompt library's pages: a user's saved prompts (and those shared with their groups, to
read), a form to create one, editing and deleting their own, and the JSON list the composer's `/`
menu reads (static/chatsite/prompts.js). Another user's prompt answers 404."""

from __future__ import annotations

from django import forms
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.http import HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from conversations.models import SavedPrompt
from conversations.services.saved_prompts import prompt_create, prompt_delete, prompt_update
from conversations.types import AuthenticatedHttpRequest, User


class PromptForm(forms.Form):
    """A saved prompt as the page writes it; its bounds are the service's (saved_prompts)."""

    title = forms.CharField(error_messages={"required": _("Give the prompt a title.")})
    text = forms.CharField(
        strip=False,
        widget=forms.Textarea(attrs={"rows": 6}),
        error_messages={"required": _("Write the prompt's text.")},
    )
    group = forms.ModelChoiceField(
        queryset=Group.objects.none(),
        required=False,
        empty_label=_("Nobody: only me"),
        error_messages={"invalid_choice": _("Share it with one of your own groups.")},
    )

    def __init__(self, *args: object, user: User, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.fields["group"].queryset = user.groups.order_by("name")  # type: ignore[attr-defined]

    def save(self, prompt: SavedPrompt | None, owner: User) -> bool:
        """Create or change the prompt through the service; False, with the errors on the form,
        when it is refused."""
        if not self.is_valid():
            return False
        values = self.cleaned_data
        try:
            if prompt is None:
                prompt_create(owner=owner, **values)
            else:
                prompt_update(prompt=prompt, **values)
        except ValidationError as refused:
            self.add_error(None, refused)  # by field where it names them
            return False
        return True


@login_required
@require_http_methods(["GET", "POST"])
def prompt_library(request: AuthenticatedHttpRequest) -> HttpResponse:
    form = PromptForm(request.POST or None, user=request.user)
    if request.method == "POST" and form.save(None, request.user):
        return redirect("prompt-library")
    visible = SavedPrompt.objects.visible_to(request.user).select_related("owner", "group")
    return render(
        request,
        "conversations/prompts.html",
        {
            "mine": [p for p in visible if p.owner_id == request.user.pk],
            "shared": [p for p in visible if p.owner_id != request.user.pk],
            "form": form,
        },
        status=400 if form.errors else 200,
    )


@login_required
@require_http_methods(["GET", "POST"])
def prompt_edit(request: AuthenticatedHttpRequest, prompt_id: int) -> HttpResponse:
    prompt = get_object_or_404(SavedPrompt.objects.owned_by(request.user), pk=prompt_id)
    initial = {"title": prompt.title, "text": prompt.text, "group": prompt.group}
    form = PromptForm(request.POST or None, user=request.user, initial=initial)
    if request.method == "POST" and form.save(prompt, request.user):
        return redirect("prompt-library")
    return render(
        request,
        "conversations/prompt_edit.html",
        {"prompt": prompt, "form": form},
        status=400 if form.errors else 200,
    )


@login_required
@require_POST
def prompt_delete_view(request: AuthenticatedHttpRequest, prompt_id: int) -> HttpResponse:
    prompt = get_object_or_404(SavedPrompt.objects.owned_by(request.user), pk=prompt_id)
    prompt_delete(prompt=prompt)
    return redirect("prompt-library")


@login_required
@require_GET
def prompt_choices(request: AuthenticatedHttpRequest) -> JsonResponse:
    """The prompts the composer's `/` lists: the user's and their groups'. The text goes out as
    JSON data, and the page puts it in the message box as text, never as HTML."""
    visible = SavedPrompt.objects.visible_to(request.user).select_related("owner")
    return JsonResponse(
        {
            "prompts": [
                {
                    "id": p.pk,
                    "title": p.title,
                    "text": p.text,
                    "variables": p.variables,
                    "shared_by": None if p.owner_id == request.user.pk else p.owner.get_username(),
                }
                for p in visible
            ]
        }
    )

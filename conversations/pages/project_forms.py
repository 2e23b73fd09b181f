"""The forms of the project pages: a project's name, settings and group, and its deletion."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth.models import Group
from django.utils.translation import gettext_lazy as _

from conversations.types import User


class ProjectForm(forms.Form):
    """A project's name, what its new conversations start with (an empty field: the model's
    default; the bounds are the model's, checked by the service), and whom it is shared with."""

    name = forms.CharField(max_length=100, error_messages={"required": _("Name the project.")})
    model = forms.CharField(max_length=50, required=False)
    system_prompt = forms.CharField(
        required=False, strip=False, widget=forms.Textarea(attrs={"rows": 4})
    )
    temperature = forms.FloatField(required=False, min_value=0)
    max_tokens = forms.IntegerField(required=False, min_value=1)
    shared_with = forms.ModelChoiceField(
        queryset=Group.objects.none(),
        required=False,
        empty_label=_("Nobody: only you"),
        error_messages={"invalid_choice": _("Share only with a group you are in.")},
    )

    def __init__(self, *args: Any, owner: User, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Only the owner's own groups are offered, and accepted.
        self.fields["shared_with"].queryset = owner.groups.order_by("name")  # type: ignore[attr-defined]

    def settings(self) -> dict[str, object]:
        data = self.cleaned_data
        changes: dict[str, object] = {
            "system_prompt": data["system_prompt"] or None,
            "temperature": data["temperature"],
            "max_tokens": data["max_tokens"],
        }
        if data["model"]:
            changes["model_slug"] = data["model"]
        return changes


class ProjectDeleteForm(forms.Form):
    conversations = forms.ChoiceField(
        choices=[("keep", _("Keep its conversations")), ("delete", _("Delete its conversations"))],
        error_messages={
            "required": _("Say whether its conversations are kept or deleted."),
            "invalid_choice": _("Say whether its conversations are kept or deleted."),
        },
    )

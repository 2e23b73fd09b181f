"""Forms for the page's small writes: Django's CharField refuses NUL characters, which
PostgreSQL cannot store, with a readable error instead of a server error."""

from __future__ import annotations

from django import forms
from django.utils.translation import gettext_lazy as _

from conversations.models import ApiToken


class TitleForm(forms.Form):
    title = forms.CharField()  # the service cuts it to MAX_TITLE characters


class TokenForm(forms.Form):
    """A new API token: its name, and whether the gateway keeps its calls."""

    name = forms.CharField(
        error_messages={
            "required": _("Give the token a name, such as the script that will use it.")
        },
    )
    recording = forms.ChoiceField(
        choices=ApiToken.Recording.choices,
        required=False,  # a form without the field (a script's POST): the server's default
        error_messages={"invalid_choice": _("Choose which of the token's calls are kept.")},
    )

    def clean_recording(self) -> str:
        return self.cleaned_data["recording"] or ApiToken.Recording.DEFAULT


class ConversationSettingsForm(forms.Form):
    """The page's settings of one conversation; an empty field means the model's default. The
    bounds are the model's, checked by the service (conversation_configure)."""

    # The composer's picker chooses the model; the panel carries it so its bounds are the
    # ones checked. Empty: the conversation's model stays.
    model = forms.CharField(max_length=50, required=False)
    system_prompt = forms.CharField(
        required=False, strip=False, widget=forms.Textarea(attrs={"rows": 3})
    )
    temperature = forms.FloatField(required=False, min_value=0)
    max_tokens = forms.IntegerField(required=False, min_value=1)

    def changes(self) -> dict[str, object]:
        data = self.cleaned_data
        changes: dict[str, object] = {
            "system_prompt": data["system_prompt"] or None,
            "temperature": data["temperature"],
            "max_tokens": data["max_tokens"],
        }
        if data["model"]:
            changes["model_slug"] = data["model"]
        return changes


class DefaultsForm(forms.Form):
    """The account page's defaults for new conversations; the service checks the model is the
    user's to use and the instructions' length."""

    default_model = forms.CharField(max_length=50, required=False)
    default_instructions = forms.CharField(
        required=False, strip=False, widget=forms.Textarea(attrs={"rows": 4})
    )

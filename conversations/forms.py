"""Forms for the page's small writes: Django's CharField refuses NUL characters, which
PostgreSQL cannot store, with a readable error instead of a server error."""

from __future__ import annotations

from django import forms


class TitleForm(forms.Form):
    title = forms.CharField()  # the service cuts it to MAX_TITLE characters


class TokenNameForm(forms.Form):
    name = forms.CharField(
        error_messages={"required": "Give the token a name, such as the script that will use it."},
    )

"""The models users can pick, managed here besides those declared in CHAT_MODELS: the backend
from a list, its options checked per backend, an API key stored encrypted (or a variable named),
and a connection test that lists the server's models to pick from. A saved change is a new
engine at the next reply (ModelSpec.engine_key): no restart."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import URLPattern, path
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_POST

from conversations.admin.model_connection import connection_test
from conversations.engines import catalogue, specs
from conversations.engines.backends import BACKENDS
from conversations.models import ChatModel

BACKEND_LABELS = {
    "llamacpp": _("llama.cpp, in this process (a GGUF file)"),
    "openai": _("OpenAI-compatible server (vLLM, llama.cpp's server, a hosted API)"),
    "vllm": _("vLLM, in this process"),
    "scripted": _("Scripted (for tests)"),
}
# The options that have fields of their own; the rest stay in the JSON of `options`.
OWN_FIELDS = ("base_url", "api_key_env")


class ChatModelForm(forms.ModelForm[ChatModel]):
    backend = forms.ChoiceField(
        label=_("Backend"), choices=[(name, BACKEND_LABELS.get(name, name)) for name in BACKENDS]
    )
    base_url = forms.CharField(
        label=_("Base URL"),
        required=False,
        help_text=_(
            "openai: the server's base URL, e.g. http://vllm:8000/v1 (empty: CHAT_OPENAI_BASE_URL)."
        ),
    )
    api_key = forms.CharField(
        label=_("API key"),
        required=False,
        strip=True,
        # Never rendered back: the field stays empty, and empty keeps the stored key.
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text=_(
            "openai: stored encrypted, never shown again. Leave blank to keep the stored key."
        ),
    )
    clear_api_key = forms.BooleanField(label=_("Remove the stored API key"), required=False)
    api_key_env = forms.CharField(
        label=_("API key variable"),
        required=False,
        help_text=_("openai: instead of a stored key, the environment variable holding it."),
    )

    class Meta:
        model = ChatModel
        fields = (
            "name",
            "slug",
            "backend",
            "base_url",
            "api_key",
            "clear_api_key",
            "api_key_env",
            "model_id",
            "options",
            "context_tokens",
            "system_prompt",
            "temperature",
            "max_tokens",
            "max_temperature",
            "max_tokens_limit",
            "groups",
            "enabled",
            "vision",
            "tools",
            "position",
            "price_prompt_per_million",
            "price_completion_per_million",
        )
        widgets = {
            # The connection test fills the list with the server's models (admin_models.js).
            "model_id": forms.TextInput(attrs={"list": "server-models", "size": 60}),
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        options = dict(self.instance.options or {})
        for name in OWN_FIELDS:
            self.initial.setdefault(name, options.pop(name, ""))
        self.initial["options"] = options
        if self.instance.api_key_encrypted:
            stored = (
                _("A key is stored.")
                if self.instance.api_key
                else _("A key is stored but cannot be read with this server's key: type it again.")
            )
            self.fields["api_key"].help_text = f"{stored} {self.fields['api_key'].help_text}"

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        slug = cleaned.get("slug")
        if slug and slug in {spec.slug for spec in specs.declared_models()}:
            self.add_error("slug", _("A model declared in CHAT_MODELS has this slug."))
        options = cleaned.get("options") or {}
        if not isinstance(options, dict):
            self.add_error("options", _('Options are a JSON object, such as {"timeout": 30}.'))
            options = {}
        options = dict(options)
        base_url = cleaned.get("base_url", "")
        if base_url and not base_url.startswith(("http://", "https://")):
            self.add_error("base_url", _("The base URL must start with http:// or https://."))
        for name in OWN_FIELDS:  # its own field wins over the same option in the JSON
            if cleaned.get(name):
                options[name] = cleaned[name]
        cleaned["options"] = options
        if not self.errors:
            row = self._row(cleaned)
            of_options = specs.option_problems(row.backend, row.options)
            for problem in of_options:
                self.add_error("options", _sentence(problem))
            for problem in specs.spec_problems(catalogue.spec_of(row)):
                if problem not in of_options:
                    self.add_error(None, _sentence(problem))
        return cleaned

    def _row(self, cleaned: dict[str, Any]) -> ChatModel:
        """The row as it would be saved, for the spec's checks (groups aside)."""
        values = {k: v for k, v in cleaned.items() if k in {f.name for f in ChatModel._meta.fields}}
        return ChatModel(**values)

    def save(self, commit: bool = True) -> ChatModel:
        row = super().save(commit=False)
        row.options = self.cleaned_data["options"]
        if self.cleaned_data.get("api_key"):
            row.api_key = self.cleaned_data["api_key"]
        elif self.cleaned_data.get("clear_api_key"):
            row.api_key = ""
        if commit:
            row.save()
            self.save_m2m()
        return row


def _sentence(problem: str) -> str:
    return problem[0].upper() + problem[1:] + "."


@admin.register(ChatModel)
class ChatModelAdmin(admin.ModelAdmin[ChatModel]):
    """Models users can pick, besides those declared in CHAT_MODELS (listed on the page)."""

    form = ChatModelForm
    list_display = ("name", "slug", "backend", "model_id", "enabled", "position")
    list_editable = ("enabled", "position")
    list_filter = ("backend", "enabled")
    filter_horizontal = ("groups",)
    search_fields = ("name", "slug", "model_id")

    class Media:
        js = ("chatsite/admin_models.js",)

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        declared = specs.declared_models()
        return super().changelist_view(request, {**(extra_context or {}), "declared": declared})

    def get_urls(self) -> list[URLPattern]:
        test = path(
            "test-connection/",
            self.admin_site.admin_view(require_POST(self.connection_test_view)),
            name="conversations_chatmodel_test_connection",
        )
        return [test, *super().get_urls()]

    def connection_test_view(self, request: HttpRequest) -> JsonResponse:
        """The change form's "Test connection": only for staff who may add or change models
        (it sends a stored key to the URL the form names)."""
        if not (self.has_add_permission(request) or self.has_change_permission(request)):
            raise PermissionDenied
        return connection_test(request)

"""The admin's connection test of an OpenAI-compatible server: GET {base URL}/models with the
form's base URL and key, answered as JSON for the change form's "Test connection" button (the
number of models, their ids for the model field's list, or what went wrong)."""

from __future__ import annotations

import os

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from conversations.engines.base import EngineError
from conversations.engines.openai_http import list_models
from conversations.models import ChatModel

# Long enough for a hosted API across the world; the admin's page waits for it.
TEST_TIMEOUT_S = 10.0


def api_key_for_test(request: HttpRequest) -> str:
    """The key the form would save: the one typed, else the row's stored one (a blank field
    keeps it), else the variable the form names, else CHAT_OPENAI_API_KEY."""
    typed = request.POST.get("api_key", "")
    if typed:
        return typed
    object_id = request.POST.get("object_id", "")
    stored = ChatModel.objects.filter(pk=object_id).first() if object_id.isdigit() else None
    if stored is not None and stored.api_key and request.POST.get("clear_api_key") != "on":
        return stored.api_key
    variable = request.POST.get("api_key_env", "").strip()
    if variable:
        return os.environ.get(variable, "")
    return str(settings.CHAT_OPENAI_API_KEY)


def connection_test(request: HttpRequest) -> JsonResponse:
    base_url = request.POST.get("base_url", "").strip() or settings.CHAT_OPENAI_BASE_URL
    if not base_url.startswith(("http://", "https://")):
        return JsonResponse(
            {"ok": False, "error": _("The base URL must start with http:// or https://.")}
        )
    try:
        ids = list_models(base_url, api_key_for_test(request), timeout=TEST_TIMEOUT_S)
    except EngineError as exc:
        return JsonResponse({"ok": False, "error": exc.detail})  # staff read the operator's words
    summary = ngettext("Connected: %(count)d model", "Connected: %(count)d models", len(ids)) % {
        "count": len(ids)
    }
    return JsonResponse({"ok": True, "summary": summary, "models": ids})

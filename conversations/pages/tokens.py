"""The settings page where a user creates, sees and revokes their API tokens."""

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from conversations.models import ApiToken
from conversations.pages.forms import TokenForm
from conversations.services.tokens import api_token_create, api_token_revoke
from conversations.types import AuthenticatedHttpRequest

# The session key under which a new token's key waits for the page after the redirect.
NEW_TOKEN = "new_api_token"


@never_cache  # the page that shows a new key must not be kept by any cache
@login_required
@require_http_methods(["GET", "POST"])
def api_tokens(request: AuthenticatedHttpRequest) -> HttpResponse:
    """The tokens page; a POST creates one and redirects (POST-redirect-GET), so reloading the
    page that shows the new key creates no second token. The key is kept in the session only
    until that page has shown it once."""
    error = ""
    if request.method == "POST":
        form = TokenForm(request.POST)
        if form.is_valid():
            token, secret = api_token_create(
                user=request.user,
                name=form.cleaned_data["name"],
                recording=form.cleaned_data["recording"],
            )
            request.session[NEW_TOKEN] = {"id": token.pk, "key": secret}
            return redirect("api-tokens")
        error = " ".join(str(e) for errors in form.errors.values() for e in errors)
    created, key = _new_token(request)
    return render(
        request,
        "conversations/api_tokens.html",
        {
            "tokens": ApiToken.objects.owned_by(request.user),
            "created": created,
            "key": key,
            "error": error,
            "recording_choices": ApiToken.Recording.choices,
            # What a token that follows the server does: the page says it next to the choice.
            "server_records": settings.CHAT_GATEWAY_RECORD,
        },
        status=400 if error else 200,
    )


def _new_token(request: AuthenticatedHttpRequest) -> tuple[ApiToken | None, str | None]:
    """The token just created and its key, taken out of the session: shown once only."""
    new = request.session.pop(NEW_TOKEN, None)
    if not isinstance(new, dict) or not isinstance(new.get("id"), int):
        return None, None
    created = ApiToken.objects.owned_by(request.user).filter(pk=new["id"]).first()
    return (created, str(new.get("key", ""))) if created is not None else (None, None)


@login_required
@require_POST
def api_token_revoke_view(request: AuthenticatedHttpRequest, token_id: int) -> HttpResponse:
    token = get_object_or_404(ApiToken.objects.owned_by(request.user), pk=token_id)
    api_token_revoke(token=token)
    return redirect("api-tokens")

"""/metrics for Prometheus: staff users, or a scraper sending the configured bearer token."""

from __future__ import annotations

import hmac

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.urls import path
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from conversations.ops import metrics


def _has_token(request: HttpRequest) -> bool:
    token = settings.CHAT_METRICS_TOKEN
    scheme, _, sent = request.headers.get("Authorization", "").partition(" ")
    if not token or scheme.lower() != "bearer":
        return False
    # Constant-time, so the token cannot be guessed a character at a time from response times.
    return hmac.compare_digest(sent.strip().encode(), token.encode())


@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    if not _has_token(request):
        if not request.user.is_authenticated:
            response = HttpResponse("Log in as staff or send the metrics token.\n", status=401)
            response["WWW-Authenticate"] = 'Bearer realm="metrics"'
            return response
        if not request.user.is_staff:
            return HttpResponse("Metrics are for staff only.\n", status=403)
    return HttpResponse(generate_latest(metrics.registry()), content_type=CONTENT_TYPE_LATEST)


urlpatterns = [path("metrics", metrics_view, name="metrics")]

"""The single sign-on pages, mozilla-django-oidc's views (mozilla_django_oidc.urls, under /oidc/)
with the provider's authorization endpoint from its discovery document, a failed login sent back
to the login page, and 404 while single sign-on is off."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.generic import View
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from conversations.services.oidc import ProviderUnavailable, provider_metadata

logger = logging.getLogger("chatsite.oidc")


def login_failed_url() -> str:
    """The login page, saying that signing in with the provider did not work."""
    return f"{reverse('login')}?sso=failed"


class AuthenticationRequestView(OIDCAuthenticationRequestView):  # type: ignore[misc]
    """/oidc/authenticate/: a new state, nonce and PKCE verifier in the session, then off to the
    provider's authorization endpoint."""

    def __init__(self, **kwargs: Any) -> None:
        # Not the library's, which reads OIDC_OP_AUTHORIZATION_ENDPOINT from the settings: the
        # endpoint comes from discovery, in get(), where a provider that is down can be handled.
        View.__init__(self, **kwargs)
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID

    def get(self, request: HttpRequest) -> HttpResponse:
        if not settings.OIDC_ENABLED:
            raise Http404("Single sign-on is off.")
        try:
            self.OIDC_OP_AUTH_ENDPOINT = provider_metadata()["authorization_endpoint"]
        except ProviderUnavailable as exc:
            logger.error("single sign-on is unavailable: %s", exc)
            return redirect(login_failed_url())
        response: HttpResponse = super().get(request)
        return response


class CallbackView(OIDCAuthenticationCallbackView):  # type: ignore[misc]
    """/oidc/callback/: where the provider sends the browser back with a code. A state that is
    not this session's is refused (400); any other failure goes back to the login page."""

    def get(self, request: HttpRequest) -> HttpResponse:
        if not settings.OIDC_ENABLED:
            raise Http404("Single sign-on is off.")
        response: HttpResponse = super().get(request)
        return response

    @property
    def failure_url(self) -> str:
        return login_failed_url()

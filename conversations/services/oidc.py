"""Single sign-on with an OpenID Connect provider: mozilla-django-oidc's backend, with the
provider's endpoints from its discovery document and the person found by (issuer, sub).

The library does the protocol: the callback's state, nonce and PKCE verifier checked against the
session, the code exchanged, the ID token's signature checked with the provider's keys, userinfo
read. This backend adds what it leaves out: the ID token's issuer and audience, userinfo about
the same `sub`, and an account that no username or email can take over
(conversations.services.external_identities). It keeps no token.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import quote_plus

import jwt
import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import SuspiciousOperation
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from requests.auth import HTTPBasicAuth

from conversations.services.external_identities import ExternalProfile, external_user_sign_in
from conversations.types import User

logger = logging.getLogger("chatsite.oidc")

_REQUIRED_ENDPOINTS = ("authorization_endpoint", "token_endpoint", "jwks_uri")
# Discovery documents by issuer, fetched once per process at the first login that needs one.
_discovered: dict[str, dict[str, Any]] = {}


class ProviderUnavailable(Exception):
    """The provider's discovery document could not be read, or does not describe this issuer."""


def provider_metadata() -> dict[str, Any]:
    """The configured provider's discovery document (OpenID Connect Discovery 1.0), kept once
    read; a failure is not kept, so the next login tries again."""
    issuer: str = settings.CHAT_OIDC_ISSUER
    document = _discovered.get(issuer)
    if document is None:
        document = _discover(issuer)
        _discovered[issuer] = document
    return document


def _discover(issuer: str) -> dict[str, Any]:
    url = f"{issuer}/.well-known/openid-configuration"
    try:
        # The library's HTTP client and its settings, as for every other request to the provider.
        response = requests.get(
            url,
            timeout=settings.OIDC_TIMEOUT,
            verify=settings.OIDC_VERIFY_SSL,
            proxies=getattr(settings, "OIDC_PROXY", None),
        )
        response.raise_for_status()
        document = response.json()
    except (requests.RequestException, ValueError) as exc:
        raise ProviderUnavailable(f"could not read {url}: {exc}") from exc
    if not isinstance(document, dict):
        raise ProviderUnavailable(f"{url} is not a discovery document")
    # Discovery 4.3: a document naming another issuer is not this provider's.
    if str(document.get("issuer", "")).rstrip("/") != issuer:
        raise ProviderUnavailable(
            f"{url} names the issuer {document.get('issuer')!r}: set CHAT_OIDC_ISSUER to it"
        )
    missing = [name for name in _REQUIRED_ENDPOINTS if not document.get(name)]
    if missing:
        raise ProviderUnavailable(f"{url} has no {', '.join(missing)}")
    return document


class OidcBackend(OIDCAuthenticationBackend):  # type: ignore[misc]  # the library ships no types
    """mozilla-django-oidc's backend for chatsite's provider (CHAT_OIDC_ISSUER)."""

    OIDC_RP_IDP_SIGN_KEY = None  # the provider's keys come from its jwks_uri

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Not the library's: Django makes a backend for every request it signs in (get_user),
        # and that must not wait for, or fail with, the provider. Endpoints are read at a login.
        self.UserModel = get_user_model()

    @property
    def OIDC_OP_TOKEN_ENDPOINT(self) -> str:
        return str(provider_metadata()["token_endpoint"])

    @property
    def OIDC_OP_USER_ENDPOINT(self) -> str:
        return str(provider_metadata().get("userinfo_endpoint") or "")

    @property
    def OIDC_OP_JWKS_ENDPOINT(self) -> str:
        return str(provider_metadata()["jwks_uri"])

    @property
    def OIDC_RP_CLIENT_ID(self) -> str:
        return str(settings.OIDC_RP_CLIENT_ID)

    @property
    def OIDC_RP_CLIENT_SECRET(self) -> str:
        return str(settings.OIDC_RP_CLIENT_SECRET)

    @property
    def OIDC_RP_SIGN_ALGO(self) -> str:
        return str(settings.OIDC_RP_SIGN_ALGO)

    def authenticate(self, request: Any, **kwargs: Any) -> User | None:
        # Only the callback view's call, which passes the nonce and PKCE verifier it took from
        # the session: never a password form that happens to carry ?code=&state=.
        if not settings.OIDC_ENABLED or "nonce" not in kwargs or "code_verifier" not in kwargs:
            return None
        try:
            user: User | None = super().authenticate(request, **kwargs)
        except (requests.RequestException, jwt.PyJWTError, ProviderUnavailable) as exc:
            # The provider refused the code, or is down; an ID token expired or not yet valid
            # (the library turns only a bad signature into SuspiciousOperation, a 400).
            logger.warning("single sign-on failed: %r", exc)
            return None
        return user

    def get_token(self, payload: dict[str, Any]) -> dict[str, Any]:
        """The code for tokens, the client authenticated with client_secret_basic. Not the
        library's: it puts the id and secret in the header as they are, where RFC 6749 (2.3.1)
        form-encodes them first, so a provider would refuse a secret with "+" or "%" in it."""
        body = {key: value for key, value in payload.items() if key != "client_secret"}
        credentials = (quote_plus(self.OIDC_RP_CLIENT_ID), quote_plus(self.OIDC_RP_CLIENT_SECRET))
        response = requests.post(
            self.OIDC_OP_TOKEN_ENDPOINT,
            data=body,
            auth=HTTPBasicAuth(*credentials),
            verify=self.get_settings("OIDC_VERIFY_SSL", True),
            timeout=self.get_settings("OIDC_TIMEOUT", None),
            proxies=self.get_settings("OIDC_PROXY", None),
        )
        self.raise_token_response_error(response)
        tokens: dict[str, Any] = response.json()
        return tokens

    def verify_token(self, token: str, **kwargs: Any) -> dict[str, Any]:
        """The library checks the signature, expiry and nonce; not who issued it, nor for whom."""
        payload: dict[str, Any] = super().verify_token(token, **kwargs)
        if str(payload.get("iss", "")).rstrip("/") != settings.CHAT_OIDC_ISSUER:
            raise SuspiciousOperation("the ID token is from another issuer")
        audience = payload.get("aud")
        audiences = [audience] if isinstance(audience, str) else list(audience or [])
        if self.OIDC_RP_CLIENT_ID not in audiences:
            raise SuspiciousOperation("the ID token is for another client")
        return payload

    def get_userinfo(self, access_token: str, id_token: str, payload: Any) -> dict[str, Any]:
        if not self.OIDC_OP_USER_ENDPOINT:
            return {}  # optional in OpenID Connect: the ID token's claims are all there is
        claims: dict[str, Any] = super().get_userinfo(access_token, id_token, payload)
        return claims

    def get_or_create_user(
        self, access_token: str, id_token: str, payload: dict[str, Any]
    ) -> User | None:
        """The account for the ID token's `sub`, with claims from the ID token and userinfo."""
        userinfo = self.get_userinfo(access_token, id_token, payload)
        if not payload.get("sub") or userinfo.get("sub", payload["sub"]) != payload["sub"]:
            # OpenID Connect Core 5.3.2: userinfo about anyone else must not be used.
            raise SuspiciousOperation("userinfo is not about the ID token's subject")
        return external_user_sign_in(profile=profile_from_claims({**payload, **userinfo}))

    def get_user(self, user_id: int) -> User | None:
        # Django's ModelBackend's: None for a deactivated user (the library's lets them in), which
        # ends their sessions and sockets.
        user: User | None = ModelBackend.get_user(self, user_id)
        return user


def profile_from_claims(claims: dict[str, Any]) -> ExternalProfile:
    """What chatsite keeps of a login's claims, under the CHAT_OIDC_* settings."""
    groups = _names(claims.get(settings.CHAT_OIDC_GROUPS_CLAIM))
    staff_groups = set(settings.CHAT_OIDC_STAFF_GROUPS)
    given = str(claims.get("given_name") or "")
    return ExternalProfile(
        provider=f"oidc:{settings.CHAT_OIDC_ISSUER}",
        subject=str(claims["sub"]),
        username=str(claims.get("preferred_username") or ""),
        email=str(claims.get("email") or ""),
        first_name=given or str(claims.get("name") or ""),
        last_name=str(claims.get("family_name") or "") if given else "",
        groups=groups,
        is_staff=bool(staff_groups.intersection(groups)) if staff_groups else None,
    )


def _names(value: Any) -> tuple[str, ...]:
    """A claim's names: a list of strings, or one string; anything else names none."""
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list):
        return tuple(item for item in value if isinstance(item, str))
    return ()

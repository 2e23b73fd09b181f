"""Single sign-on with OpenID Connect against a real provider (panva's oidc-provider, on node):
through its own login form, back to the callback, into an account found by (issuer, sub) whose
groups, and so whose models, follow the provider's claim at every login; the state checked, no
token kept. In this process with Django's test client, and once against real daphne processes
configured from the environment alone."""

from __future__ import annotations

import importlib
import io
import json
import re
import runpy
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urljoin, urlsplit

import httpx
import pytest
from django.contrib.auth import SESSION_KEY, get_user_model
from django.contrib.auth.models import Group
from django.contrib.sessions.models import Session
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.db.models.signals import m2m_changed
from django.test import Client
from django.urls import include, path

from conversations.engines.catalogue import models_for
from conversations.models import AuditEvent, ExternalIdentity
from conversations.services import oidc
from tests.support.oidc_provider import (
    NEEDS_NODE,
    OidcProvider,
    chatsite_env,
    chatsite_serves_single_sign_on,
    oidc_provider,
)
from tests.support.servers import NEEDS_SHARED_SERVICES, ROOT, free_port, servers

pytestmark = [pytest.mark.django_db, NEEDS_NODE]

BACKEND = "conversations.services.oidc.OidcBackend"
OIDC_SETTINGS = ROOT / "chatsite" / "oidc_settings.py"
RP = "http://testserver"
MODELS = [
    {"slug": "open", "backend": "scripted"},
    {"slug": "team-only", "backend": "scripted", "groups": ["team"]},
]
# A JWT (header.payload.signature), which ID tokens are.
JWT = re.compile(r"eyJ[\w-]+\.[\w-]+\.[\w-]+")

# This module is the test's URL conf: the library's views under /oidc/ beside chatsite's own
# (chatsite.urls may include them too; the first match wins and they are the same views).
urlpatterns = [
    path("oidc/", include("mozilla_django_oidc.urls")),
    path("", include("chatsite.urls")),
]


def oidc_site_settings(monkeypatch: pytest.MonkeyPatch, **env: str) -> dict[str, Any]:
    """What chatsite/oidc_settings.py makes of this environment (run afresh, not imported)."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    namespace = runpy.run_path(str(OIDC_SETTINGS))
    return {
        name: value for name, value in namespace.items() if name.startswith(("OIDC_", "CHAT_OIDC_"))
    }


def use_settings(settings: Any, values: dict[str, Any]) -> None:
    for name, value in values.items():
        setattr(settings, name, value)
    settings.AUTHENTICATION_BACKENDS = [*settings.AUTHENTICATION_BACKENDS, BACKEND]
    settings.ROOT_URLCONF = __name__
    settings.CHAT_MODELS = json.dumps(MODELS)
    # The library's urls pick their view classes from the settings when imported.
    importlib.reload(importlib.import_module("mozilla_django_oidc.urls"))


@pytest.fixture
def idp(tmp_path: Path) -> Iterator[OidcProvider]:
    with oidc_provider(tmp_path, redirect_uris=[f"{RP}/oidc/callback/"]) as provider:
        yield provider


@pytest.fixture
def sso(idp: OidcProvider, settings: Any, monkeypatch: pytest.MonkeyPatch) -> OidcProvider:
    """chatsite configured for `idp` as its environment would configure it."""
    monkeypatch.setattr(oidc, "_discovered", {})
    use_settings(settings, oidc_site_settings(monkeypatch, **chatsite_env(idp.issuer)))
    return idp


@pytest.fixture
def browser() -> Iterator[httpx.Client]:
    """The browser's side at the provider: its cookies (the provider's session) and forms."""
    with httpx.Client(timeout=10) as http:
        yield http


def provider_until_callback(browser: httpx.Client, url: str, login: str) -> str:
    """Follow the provider from its authorization URL, signing in through its login form when
    it shows it, to the callback URL it sends the browser back to."""
    for _ in range(10):
        response = browser.get(url)
        if response.status_code == 200:
            page = response.text
            assert 'name="login"' in page and 'name="password"' in page, page[:500]
            (action,) = re.findall(r'<form[^>]*action="([^"]+)"', page)
            response = browser.post(
                urljoin(url, action),
                data={"prompt": "login", "login": login, "password": "any password"},
            )
        assert response.is_redirect, response.text[:500]
        url = urljoin(url, response.headers["location"])
        if url.startswith(RP):
            return url
    raise AssertionError("the provider never sent the browser back")


def begin(client: Client, next_url: str = "") -> str:
    """/oidc/authenticate/: the provider's authorization URL it redirects to."""
    response = client.get("/oidc/authenticate/", {"next": next_url} if next_url else {})
    assert response.status_code == 302
    location: str = response["Location"]
    return location


def back_at(client: Client, callback: str, **changes: str) -> Any:
    parts = urlsplit(callback)
    query = {**dict(parse_qsl(parts.query)), **changes}
    return client.get(f"{parts.path}?{urlencode(query)}")


def sign_in(client: Client, browser: httpx.Client, login: str) -> Any:
    """A whole login: chatsite, the provider's form, chatsite's callback (its response)."""
    return back_at(client, provider_until_callback(browser, begin(client), login))


def signed_in_as(client: Client) -> Any:
    user_id = client.session.get(SESSION_KEY)
    return get_user_model().objects.get(pk=user_id) if user_id else None


def group_names(user: Any) -> set[str]:
    return set(user.groups.values_list("name", flat=True))


def model_slugs(user: Any) -> list[str]:
    return [spec.slug for spec in models_for(user)]


def test_it_signs_a_new_person_in_through_the_providers_form_with_their_groups(
    sso: OidcProvider, browser: httpx.Client
) -> None:
    # One signs in as (and is the subject) e1042; one's preferred username is dana.
    sso.add_user("e1042", username="dana", groups=["team", "admins"], name="Dana Scully")
    client = Client()
    assert not oidc._discovered  # nothing fetched until a login needs it

    authorize = begin(client, next_url="/account/")
    assert authorize.startswith(f"{sso.issuer}/auth?")
    asked = dict(parse_qsl(urlsplit(authorize).query))
    assert asked["code_challenge_method"] == "S256" and asked["nonce"] and asked["state"]
    response = back_at(client, provider_until_callback(browser, authorize, "e1042"))

    assert response.status_code == 302 and response["Location"] == "/account/"
    dana = signed_in_as(client)
    identity = ExternalIdentity.objects.get(user=dana)
    assert (identity.provider, identity.subject) == (f"oidc:{sso.issuer}", "e1042")
    assert (dana.username, dana.email, dana.first_name) == (
        "dana",
        "e1042@corp.example",
        "Dana Scully",
    )
    assert not dana.has_usable_password()  # signs in at the provider only
    assert group_names(dana) == {"team", "admins"}
    assert dana.is_staff and not dana.is_superuser  # "admins" is one of CHAT_OIDC_STAFF_GROUPS
    assert model_slugs(dana) == ["open", "team-only"]
    assert client.get("/account/").status_code == 200


def test_it_follows_the_providers_groups_at_the_next_login(
    sso: OidcProvider, browser: httpx.Client
) -> None:
    sso.add_user("e1042", username="dana", groups=["team", "admins"])
    sign_in(Client(), browser, "e1042")
    dana = get_user_model().objects.get(username="dana")
    beta = Group.objects.create(name="beta")
    dana.groups.add(beta)  # given in chatsite: not the provider's to take away
    sso.set_groups("e1042", ["readers"])
    # Renamed at the provider: still the same person (sub), the same account.
    sso.change("e1042", preferred_username="dana.scully")

    removed: list[set[str]] = []

    def record(sender: Any, instance: Any, action: str, pk_set: Any, **kwargs: Any) -> None:
        if action == "post_remove":
            removed.append(set(Group.objects.filter(pk__in=pk_set).values_list("name", flat=True)))

    m2m_changed.connect(record, sender=get_user_model().groups.through)
    try:
        # The provider remembers the browser: no form this time, straight back with a code.
        again = Client()
        assert sign_in(again, browser, "e1042").status_code == 302
    finally:
        m2m_changed.disconnect(record, sender=get_user_model().groups.through)

    assert signed_in_as(again).pk == dana.pk
    assert get_user_model().objects.count() == 1
    dana.refresh_from_db()
    assert dana.username == "dana"
    assert group_names(dana) == {"readers", "beta"}
    # Through m2m_changed, which stops the replies of models a person may no longer use.
    assert removed == [{"team", "admins"}]
    assert not dana.is_staff
    assert model_slugs(dana) == ["open"]
    # The audit log names the provider as who changed dana's groups at the sign-in.
    changes = AuditEvent.objects.filter(event="groups_changed", subject_id=dana.pk).order_by("id")
    by_provider = [(e.actor, e.detail) for e in changes if e.actor.endswith("(single sign-on)")]
    assert [detail for _, detail in by_provider][-2:] == [
        {"removed": ["admins", "team"]},
        {"added": ["readers"]},
    ]
    assert by_provider[-1][0] == f"oidc:{sso.issuer} (single sign-on)"


def test_it_never_signs_into_a_local_account_with_the_same_username_or_email(
    sso: OidcProvider, browser: httpx.Client, users: dict[str, Any]
) -> None:
    alice = users["alice"]  # a local account, with a password
    sso.add_user("alice", email="alice@example.com", groups=["team", "admins"])
    client = Client()
    assert sign_in(client, browser, "alice").status_code == 302

    newcomer = signed_in_as(client)
    assert newcomer.pk != alice.pk
    assert newcomer.username == "alice-2"
    alice.refresh_from_db()
    assert alice.has_usable_password() and group_names(alice) == set() and not alice.is_staff
    assert model_slugs(alice) == ["open"]
    # Her password goes on signing her in beside single sign-on.
    password_login = Client().post(
        "/accounts/login/", {"username": "alice", "password": "alice-password"}
    )
    assert password_login.status_code == 302


def test_a_deactivated_account_is_signed_out_and_stays_out(
    sso: OidcProvider, browser: httpx.Client
) -> None:
    sso.add_user("dana", groups=["team"])
    client = Client()
    sign_in(client, browser, "dana")
    dana = signed_in_as(client)
    dana.is_active = False
    dana.save()

    assert client.get("/account/").status_code == 302  # the session ends
    again = Client()
    refused = sign_in(again, browser, "dana")
    assert refused["Location"] == "/accounts/login/?sso=failed"
    assert signed_in_as(again) is None
    dana.refresh_from_db()
    assert not dana.is_active


def test_it_refuses_a_callback_whose_state_is_not_this_sessions(
    sso: OidcProvider, browser: httpx.Client
) -> None:
    sso.add_user("dana", groups=["team"])
    client = Client()
    callback = provider_until_callback(browser, begin(client), "dana")

    assert back_at(client, callback, state="forged-state").status_code == 400
    # The same code and state in another browser (a login forced on someone): not theirs.
    someone_else = Client()
    someone_else.get("/accounts/login/")
    refused = back_at(someone_else, callback)
    assert refused.status_code == 302 and refused["Location"] == "/accounts/login/?sso=failed"
    assert signed_in_as(client) is None and signed_in_as(someone_else) is None
    assert not get_user_model().objects.exists()

    # The state was what was wrong: the real callback in the browser that began it signs in.
    assert back_at(client, callback).status_code == 302
    assert signed_in_as(client).username == "dana"


def test_it_keeps_no_token_in_the_session_or_the_database(
    sso: OidcProvider, browser: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    issued: list[dict[str, Any]] = []
    get_token = oidc.OidcBackend.get_token

    def recording(self: Any, payload: dict[str, Any]) -> dict[str, Any]:
        tokens: dict[str, Any] = get_token(self, payload)
        issued.append(tokens)
        return tokens

    monkeypatch.setattr(oidc.OidcBackend, "get_token", recording)
    sso.add_user("dana", groups=["team"])
    client = Client()
    assert sign_in(client, browser, "dana").status_code == 302

    (tokens,) = issued
    secrets = [tokens["id_token"], tokens["access_token"], tokens.get("refresh_token")]
    assert JWT.fullmatch(tokens["id_token"])
    stored = io.StringIO()
    call_command("dumpdata", stdout=stored)
    sessions = json.dumps([session.get_decoded() for session in Session.objects.all()])
    assert "dana" in stored.getvalue()
    for secret in filter(None, secrets):
        assert secret not in stored.getvalue()
        assert secret not in sessions
    assert not JWT.search(sessions)
    assert not {"oidc_access_token", "oidc_id_token"} & set(client.session.keys())


def test_a_provider_that_cannot_be_reached_sends_the_login_back(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(oidc, "_discovered", {})
    down = f"http://127.0.0.1:{free_port()}"
    # Reading the settings fetches nothing, so a provider that is down cannot stop a start-up.
    values = oidc_site_settings(
        monkeypatch,
        CHAT_OIDC_ISSUER=down,
        CHAT_OIDC_CLIENT_ID="chatsite",
        CHAT_OIDC_CLIENT_SECRET="secret",
    )
    use_settings(settings, values)
    response = Client().get("/oidc/authenticate/")
    assert response.status_code == 302 and response["Location"] == "/accounts/login/?sso=failed"
    assert not oidc._discovered  # a failure is not kept: the next login tries again


def test_it_is_off_without_an_issuer(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CHAT_OIDC_ISSUER", raising=False)
    values = oidc_site_settings(monkeypatch)
    assert values["OIDC_ENABLED"] is False and values["CHAT_OIDC_NAME"] == ""
    use_settings(settings, values)
    assert Client().get("/oidc/authenticate/").status_code == 404
    assert Client().get("/oidc/callback/", {"code": "c", "state": "s"}).status_code == 404


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"CHAT_OIDC_ISSUER": "https://id.example.com"}, "CHAT_OIDC_CLIENT_SECRET must be set"),
        ({"CHAT_OIDC_ISSUER": "http://id.example.com"}, "must use https"),
        ({"CHAT_OIDC_ISSUER": "id.example.com"}, "the provider's issuer URL"),
        (
            {
                "CHAT_OIDC_ISSUER": "https://id.example.com",
                "CHAT_OIDC_CLIENT_ID": "chatsite",
                "CHAT_OIDC_CLIENT_SECRET": "secret",
                "CHAT_OIDC_SCOPES": "email profile",
            },
            "must include openid",
        ),
    ],
)
def test_a_setting_that_cannot_work_says_what_to_change(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], message: str
) -> None:
    for name in ("CHAT_OIDC_CLIENT_ID", "CHAT_OIDC_CLIENT_SECRET", "CHAT_OIDC_SCOPES"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ImproperlyConfigured, match=message):
        oidc_site_settings(monkeypatch, **env)


@pytest.mark.processes
@NEEDS_SHARED_SERVICES
@pytest.mark.django_db(transaction=True)
def test_daphne_configured_from_the_environment_signs_people_in(
    tmp_path: Path, settings: Any
) -> None:
    """The provider starts after chatsite, on the port its CHAT_OIDC_ISSUER names: discovery
    waits for the first login. One HTTP client is the browser, at both."""
    if not chatsite_serves_single_sign_on():
        pytest.skip("chatsite.settings and chatsite.urls do not include single sign-on")
    port = free_port()
    issuer = f"http://127.0.0.1:{port}"
    env = {**chatsite_env(issuer), "CHAT_MODELS": json.dumps(MODELS)}
    with (
        servers(1, tmp_path, **env) as (site,),
        oidc_provider(tmp_path, redirect_uris=[f"{site.origin}/oidc/callback/"], port=port) as idp,
        httpx.Client(base_url=site.origin, timeout=10) as http,
    ):
        idp.add_user("erin", groups=["team", "ops"])
        login_page = http.get("/accounts/login/")
        assert "Sign in with Corp ID" in login_page.text
        response = http.get("/oidc/authenticate/", follow_redirects=True)
        (action,) = re.findall(r'<form[^>]*action="([^"]+)"', response.text)
        done = http.post(
            urljoin(str(response.url), action),
            data={"prompt": "login", "login": "erin", "password": "any password"},
            follow_redirects=True,
        )
        assert done.status_code == 200 and str(done.url) == f"{site.origin}/"
        assert http.get("/account/").status_code == 200

    settings.CHAT_MODELS = json.dumps(MODELS)
    erin = get_user_model().objects.get(username="erin")
    assert group_names(erin) == {"team", "ops"} and erin.is_staff
    assert model_slugs(erin) == ["open", "team-only"]

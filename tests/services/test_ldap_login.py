"""Signing in with a directory's password (conversations.services.ldap_login), against a real
OpenLDAP slapd (tests/support/ldap_server.py): the directory's groups become the user's, and so
decide their models; its staff group makes staff; a local account is never taken over."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.test import Client

from conversations.models import ExternalIdentity

pytest.importorskip("django_auth_ldap", reason="needs the ldap extra (django-auth-ldap)")

from chatsite.ldap_settings import ldap_settings
from conversations.engines.catalogue import models_for
from tests.support.ldap_server import Directory, ldap_directory, slapd_path
from tests.support.servers import ROOT

pytestmark = pytest.mark.django_db

LDAP_BACKEND = "conversations.services.ldap_login.LdapBackend"
MODELS = [
    {"slug": "open", "backend": "scripted"},
    {"slug": "team-only", "backend": "scripted", "groups": ["team"]},
]
# alice is in the team and on the staff, bob is a teammate of nobody's, charlie is in the
# directory too but has a local account of the same name, which the directory must not get.
PEOPLE = {"alice": "alice-ldap-secret", "bob": "bob-ldap-secret", "charlie": "charlie-ldap-secret"}
GROUPS = {"team": ["alice"], "staff": ["alice"]}


PEOPLE_BASE = "ou=people,dc=example,dc=org"
GROUPS_BASE = "ou=groups,dc=example,dc=org"


@pytest.fixture
def backends(settings: Any) -> None:
    settings.AUTHENTICATION_BACKENDS = [
        "axes.backends.AxesStandaloneBackend",
        LDAP_BACKEND,
        "conversations.services.password_login.PasswordBackend",
    ]
    settings.CHAT_MODELS = json.dumps(MODELS)


@pytest.fixture
def directory(backends: None, settings: Any) -> Iterator[Directory]:
    """A directory of PEOPLE and GROUPS, and the site's settings pointed at it, as CHAT_LDAP_*
    would set them."""
    if slapd_path() is None:
        pytest.skip("needs OpenLDAP's slapd (Debian: slapd)")
    with ldap_directory(users=PEOPLE, groups=GROUPS) as running:
        built = ldap_settings(
            uri=running.uri,
            bind_dn=running.bind_dn,
            bind_password=running.bind_password,
            user_search_base=running.people_dn,
            group_search_base=running.groups_dn,
            staff_group=running.group_dn("staff"),
        )
        for name, value in built.items():
            setattr(settings, name, value)
        yield running


def log_in(username: str, password: str) -> tuple[Client, int]:
    client = Client()
    response = client.post("/accounts/login/", {"username": username, "password": password})
    return client, response.status_code


def slugs_for(username: str) -> list[str]:
    user = get_user_model().objects.get(username=username)
    return [spec.slug for spec in models_for(user)]


@pytest.mark.usefixtures("directory")
def test_it_signs_in_a_directory_user_with_their_directory_details() -> None:
    client, status = log_in("alice", PEOPLE["alice"])
    assert status == 302
    assert client.get("/").status_code == 200
    alice = get_user_model().objects.get(username="alice")
    assert (alice.first_name, alice.last_name, alice.email) == (
        "Alice",
        "Example",
        "alice@example.org",
    )
    # The mark of an account the directory owns: no local password to sign in with.
    assert not alice.has_usable_password()


@pytest.mark.usefixtures("directory")
def test_it_refuses_a_wrong_password_and_an_unknown_user() -> None:
    _, status = log_in("alice", "not-alices-password")
    assert status == 200  # the form again, with its error
    _, status = log_in("dave", "anything")
    assert status == 200
    assert not get_user_model().objects.filter(username__in=["alice", "dave"]).exists()


def test_it_mirrors_the_directory_groups_that_decide_the_models(directory: Directory) -> None:
    log_in("alice", PEOPLE["alice"])
    log_in("bob", PEOPLE["bob"])
    assert slugs_for("alice") == ["open", "team-only"]
    assert slugs_for("bob") == ["open"]

    directory.remove_from_group("alice", "team")
    directory.add_to_group("bob", "team")
    log_in("alice", PEOPLE["alice"])
    log_in("bob", PEOPLE["bob"])
    assert slugs_for("alice") == ["open"]
    assert slugs_for("bob") == ["open", "team-only"]
    bob = get_user_model().objects.get(username="bob")
    assert sorted(bob.groups.values_list("name", flat=True)) == ["team"]


def test_the_staff_group_makes_staff_while_its_members_stay_in_it(directory: Directory) -> None:
    log_in("alice", PEOPLE["alice"])
    log_in("bob", PEOPLE["bob"])
    User = get_user_model()
    assert User.objects.get(username="alice").is_staff
    assert not User.objects.get(username="bob").is_staff

    directory.remove_from_group("alice", "staff")
    log_in("alice", PEOPLE["alice"])
    assert not User.objects.get(username="alice").is_staff


@pytest.mark.usefixtures("directory")
def test_it_never_takes_over_a_local_account_of_the_same_name() -> None:
    charlie = get_user_model().objects.create_user(
        "charlie", "charlie@local.example", "charlie-local-password"
    )
    _, status = log_in("charlie", PEOPLE["charlie"])
    assert status == 200  # the directory's password does not open the local account
    charlie.refresh_from_db()
    assert charlie.email == "charlie@local.example"
    assert charlie.check_password("charlie-local-password")
    assert not charlie.groups.exists()

    _, status = log_in("charlie", "charlie-local-password")
    assert status == 302  # the password backend still signs the local account in


@pytest.mark.usefixtures("directory")
def test_it_never_takes_over_a_single_sign_on_account_of_the_same_name() -> None:
    charlie = get_user_model().objects.create_user("charlie")  # no password, as single sign-on's
    ExternalIdentity.objects.create(user=charlie, provider="oidc:https://id.example", subject="c1")
    _, status = log_in("charlie", PEOPLE["charlie"])
    assert status == 200
    charlie.refresh_from_db()
    assert not charlie.email and not charlie.groups.exists()


def test_a_deactivated_directory_user_is_signed_out_and_kept_out() -> None:
    client, _ = log_in("alice", PEOPLE["alice"])
    get_user_model().objects.filter(username="alice").update(is_active=False)
    assert client.get("/").status_code == 302  # the session no longer signs anyone in
    _, status = log_in("alice", PEOPLE["alice"])
    assert status == 200


@pytest.mark.usefixtures("backends")
def test_with_ldap_off_the_backend_refuses_without_a_directory(settings: Any) -> None:
    for name, value in ldap_settings(uri="").items():
        setattr(settings, name, value)
    _, status = log_in("alice", PEOPLE["alice"])
    assert status == 200
    assert not get_user_model().objects.filter(username="alice").exists()


@pytest.mark.parametrize(
    ("settings_kwargs", "names"),
    [
        ({"user_search_base": ""}, "CHAT_LDAP_USER_SEARCH_BASE"),
        ({"user_filter": "(uid=alice)"}, "CHAT_LDAP_USER_FILTER"),
        ({"group_search_base": ""}, "CHAT_LDAP_GROUP_SEARCH_BASE"),
    ],
)
def test_it_refuses_settings_that_cannot_work(settings_kwargs: dict[str, str], names: str) -> None:
    complete = {
        "uri": "ldap://ldap.example:389/",
        "user_search_base": PEOPLE_BASE,
        "group_search_base": GROUPS_BASE,
        **settings_kwargs,
    }
    with pytest.raises(ImproperlyConfigured, match=names):
        ldap_settings(**complete)


PRINT_LDAP = (
    "import json, chatsite.ldap_settings as s; print(json.dumps({'enabled': s.LDAP_ENABLED, "
    "'names': sorted(n for n in vars(s) if n.startswith('AUTH_LDAP_')), "
    "'mirror': getattr(s, 'AUTH_LDAP_MIRROR_GROUPS', None), "
    "'user_filter': getattr(getattr(s, 'AUTH_LDAP_USER_SEARCH', None), 'filterstr', None)}))"
)


def ldap_settings_from(**env: str) -> dict[str, Any]:
    """chatsite.ldap_settings imported in a fresh interpreter with only these CHAT_LDAP_*."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("CHAT_LDAP_")}
    result = subprocess.run(
        [sys.executable, "-c", PRINT_LDAP],
        cwd=ROOT,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    read: dict[str, Any] = json.loads(result.stdout)
    return read


def test_it_reads_the_directory_from_the_environment() -> None:
    assert ldap_settings_from() == {
        "enabled": False,
        "names": ["AUTH_LDAP_SERVER_URI"],
        "mirror": None,
        "user_filter": None,
    }
    read = ldap_settings_from(
        CHAT_LDAP_URI="ldaps://ldap.example/",
        CHAT_LDAP_USER_SEARCH_BASE=PEOPLE_BASE,
        CHAT_LDAP_USER_FILTER="(&(objectClass=inetOrgPerson)(uid=%(user)s))",
        CHAT_LDAP_MIRROR_GROUPS="0",
    )
    assert read["enabled"] is True
    assert read["mirror"] is False
    assert "AUTH_LDAP_GROUP_SEARCH" not in read["names"]
    assert read["user_filter"] == "(&(objectClass=inetOrgPerson)(uid=%(user)s))"

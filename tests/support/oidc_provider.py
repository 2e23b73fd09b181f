"""A real OpenID Provider for the single sign-on tests: panva's oidc-provider (tests/support/oidc),
run under node on a free loopback port.

    with oidc_provider(tmp_path, redirect_uris=["http://testserver/oidc/callback/"]) as idp:
        idp.add_user("alice", groups=["team"])
        ...  # sign in at idp.issuer with idp.client_id / idp.client_secret
        idp.set_groups("alice", [])  # the next login (or userinfo call) sees it

The login form is the provider's own (its development interactions, which take any password):
the relying party meets what it meets at any provider, a form, then a redirect back with a code.
oidc-provider 9 needs Node.js 20 or later (it warns below 22).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.urls import NoReverseMatch, reverse

from tests.support.launch import stop_servers, wait_until_serving
from tests.support.npm import NPM, npm_ci_once
from tests.support.servers import answers, free_port

PROVIDER_DIR = Path(__file__).resolve().parent / "oidc"
NODE = shutil.which("node")
NODE_MAJOR_NEEDED = 20


def node_major() -> int:
    """The installed Node.js's major version; 0 without node or npm."""
    if NODE is None or NPM is None:
        return 0
    version = subprocess.run([NODE, "--version"], capture_output=True, text=True, timeout=30)
    return int(version.stdout.strip().lstrip("v").split(".")[0] or 0)


NEEDS_NODE = pytest.mark.skipif(
    node_major() < NODE_MAJOR_NEEDED,
    reason=f"needs node {NODE_MAJOR_NEEDED}+ and npm (the OpenID Provider runs on node)",
)

CLIENT_ID = "chatsite"
# "+" and "%" on purpose: client_secret_basic form-encodes them first (RFC 6749, 2.3.1).
CLIENT_SECRET = "tests-only+client%secret"


def chatsite_env(issuer: str) -> dict[str, str]:
    """chatsite's environment for the test provider at `issuer`: the client above, two staff
    groups, and the provider's own scope for the groups claim (as Okta and Dex have)."""
    return {
        "CHAT_OIDC_ISSUER": issuer,
        "CHAT_OIDC_CLIENT_ID": CLIENT_ID,
        "CHAT_OIDC_CLIENT_SECRET": CLIENT_SECRET,
        "CHAT_OIDC_NAME": "Corp ID",
        "CHAT_OIDC_STAFF_GROUPS": "admins, ops",
        "CHAT_OIDC_SCOPES": "openid email profile groups",
    }


def chatsite_serves_single_sign_on() -> bool:
    """chatsite.settings imports chatsite/oidc_settings.py and the site's URLs have /oidc/: a
    server started with chatsite_env() signs people in with the provider."""
    try:
        reverse("oidc_authentication_init")
    except NoReverseMatch:
        return False
    return hasattr(settings, "OIDC_ENABLED")


@dataclass
class OidcProvider:
    issuer: str
    client_id: str
    client_secret: str
    users_file: Path

    def users(self) -> dict[str, Any]:
        users: dict[str, Any] = json.loads(self.users_file.read_text())
        return users

    def add_user(
        self,
        login: str,
        *,
        groups: Sequence[str] = (),
        email: str | None = None,
        name: str | None = None,
        username: str | None = None,
    ) -> None:
        """Someone who can sign in at the provider as `login`, which is also their subject (sub);
        `username` is their preferred_username (the login, unset)."""
        users = self.users()
        users[login] = {
            "preferred_username": username or login,
            "name": name or login.title(),
            "email": email if email is not None else f"{login}@corp.example",
            "groups": list(groups),
        }
        self._write(users)

    def set_groups(self, login: str, groups: Sequence[str]) -> None:
        """The provider reads its users on every lookup: the next login gets these groups."""
        self.change(login, groups=list(groups))

    def change(self, login: str, **claims: Any) -> None:
        """Change someone's claims (groups, preferred_username, email, ...) at the provider."""
        users = self.users()
        users[login].update(claims)
        self._write(users)

    def _write(self, users: dict[str, Any]) -> None:
        # Written whole and renamed: the provider never reads a half-written file.
        draft = self.users_file.with_suffix(".tmp")
        draft.write_text(json.dumps(users))
        draft.replace(self.users_file)


@contextmanager
def oidc_provider(
    tmp_path: Path,
    *,
    redirect_uris: Sequence[str],
    client_id: str = CLIENT_ID,
    client_secret: str = CLIENT_SECRET,
    port: int | None = None,
) -> Iterator[OidcProvider]:
    """The provider (on `port`, or a free one), serving once its discovery document answers;
    stopped after."""
    npm_ci_once(PROVIDER_DIR, "oidc-provider")
    users_file = tmp_path / "oidc-users.json"
    users_file.write_text("{}")
    port = port or free_port()
    log = tmp_path / "oidc-provider.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [
                str(NODE),
                "provider.mjs",
                *("--port", str(port)),
                *("--client-id", client_id),
                *("--client-secret", client_secret),
                *("--redirect-uri", ",".join(redirect_uris)),
                *("--users", str(users_file)),
            ],
            cwd=PROVIDER_DIR,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    issuer = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(
            process,
            answers(f"{issuer}/.well-known/openid-configuration"),
            name="oidc-provider",
            log=log.read_text,
        )
        yield OidcProvider(issuer, client_id, client_secret, users_file)
    finally:
        stop_servers([process], grace=5)

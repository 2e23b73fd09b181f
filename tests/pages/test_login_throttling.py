"""Login throttling (django-axes): lockout by username and by address, cool-off, no hashing once locked."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from axes.models import AccessAttempt
from axes.utils import reset
from django.conf import settings as django_settings
from django.contrib.auth.hashers import MD5PasswordHasher
from django.db.models import F
from django.test import AsyncClient, Client
from django.urls import reverse

from conversations.services.tokens import api_token_create
from tests.support.db import close_worker_connections

SITE_LOGIN = "/accounts/login/"
ADMIN_LOGIN = "/admin/login/"
LOCKED = "Too many failed logins"


def log_in(url: str, username: str, password: str, ip: str = "10.0.0.1") -> Any:
    data = {"username": username, "password": password}
    if url == ADMIN_LOGIN:
        data["next"] = "/admin/"
    return Client().post(url, data, REMOTE_ADDR=ip)


def fail_until_locked(url: str, username: str, ip: str = "10.0.0.1") -> None:
    for _ in range(django_settings.AXES_FAILURE_LIMIT):
        log_in(url, username, "wrong", ip)


def assert_locked_out(response: Any) -> None:
    assert response.status_code == 429
    text = response.content.decode()
    assert LOCKED in text
    assert f"Wait {django_settings.LOGIN_COOLOFF_MINUTES} minutes and try again." in text


def assert_logged_in(response: Any, to: str = "/") -> None:
    assert response.status_code == 302, response.content.decode()[:500]
    assert response["Location"] == to


@pytest.fixture
def hashings(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every password hash the configured hasher (MD5 in tests) computes, by the user's password."""
    calls: list[str] = []
    verify, encode = MD5PasswordHasher.verify, MD5PasswordHasher.encode

    def counted_verify(self: MD5PasswordHasher, password: str, encoded: str) -> bool:
        calls.append(password)
        return verify(self, password, encoded)

    def counted_encode(self: MD5PasswordHasher, password: str, salt: str) -> str:
        calls.append(password)
        return encode(self, password, salt)

    monkeypatch.setattr(MD5PasswordHasher, "verify", counted_verify)
    monkeypatch.setattr(MD5PasswordHasher, "encode", counted_encode)
    return calls


def test_it_locks_out_a_username_after_the_failure_limit(users: dict[str, Any]) -> None:
    assert django_settings.AXES_FAILURE_LIMIT == django_settings.LOGIN_FAILURE_LIMIT == 5
    for _ in range(django_settings.AXES_FAILURE_LIMIT - 1):
        response = log_in(SITE_LOGIN, "alice", "wrong")
        assert response.status_code == 200
        assert "didn't match" in response.content.decode()

    assert_locked_out(log_in(SITE_LOGIN, "alice", "wrong"))
    assert_locked_out(log_in(SITE_LOGIN, "alice", "alice-password"))
    # By username: the right password from another address is refused too.
    assert_locked_out(log_in(SITE_LOGIN, "alice", "alice-password", ip="10.0.0.50"))


def test_it_locks_out_the_admin_login(users: dict[str, Any]) -> None:
    alice = users["alice"]
    alice.is_staff = alice.is_superuser = True
    alice.save()
    fail_until_locked(ADMIN_LOGIN, "alice")

    assert_locked_out(log_in(ADMIN_LOGIN, "alice", "alice-password"))
    # The site login shares the count: it is the same account.
    assert_locked_out(log_in(SITE_LOGIN, "alice", "alice-password"))


def test_it_does_not_lock_out_another_user_from_another_address(users: dict[str, Any]) -> None:
    fail_until_locked(SITE_LOGIN, "alice")

    assert_logged_in(log_in(SITE_LOGIN, "bob", "bob-password", ip="10.0.0.2"))


def test_it_locks_out_an_address_that_tries_many_usernames(users: dict[str, Any]) -> None:
    for number in range(django_settings.AXES_FAILURE_LIMIT):
        log_in(SITE_LOGIN, f"guess{number}", "wrong", ip="10.0.0.9")

    # bob never failed, but this address did.
    assert_locked_out(log_in(SITE_LOGIN, "bob", "bob-password", ip="10.0.0.9"))
    assert_logged_in(log_in(SITE_LOGIN, "bob", "bob-password", ip="10.0.0.2"))


def test_it_lets_the_right_password_in_after_the_cool_off(users: dict[str, Any]) -> None:
    fail_until_locked(SITE_LOGIN, "alice")
    cool_off = timedelta(minutes=django_settings.LOGIN_COOLOFF_MINUTES)

    # Moves the clock instead of sleeping: the failures happened almost a whole cool-off ago.
    AccessAttempt.objects.update(attempt_time=F("attempt_time") - cool_off + timedelta(minutes=1))
    assert_locked_out(log_in(SITE_LOGIN, "alice", "alice-password"))

    # Refused attempts count as failures and restart the cool-off; now it has all passed.
    AccessAttempt.objects.update(attempt_time=F("attempt_time") - cool_off)
    assert_logged_in(log_in(SITE_LOGIN, "alice", "alice-password"))


def test_it_lets_support_reset_a_lockout(users: dict[str, Any]) -> None:
    fail_until_locked(SITE_LOGIN, "alice")
    assert_locked_out(log_in(SITE_LOGIN, "alice", "alice-password"))

    assert reset(username="alice") > 0

    assert_logged_in(log_in(SITE_LOGIN, "alice", "alice-password"))


def test_it_forgets_failures_after_a_successful_login(users: dict[str, Any]) -> None:
    for _ in range(django_settings.AXES_FAILURE_LIMIT - 1):
        log_in(SITE_LOGIN, "alice", "wrong")
    assert_logged_in(log_in(SITE_LOGIN, "alice", "alice-password"))

    for _ in range(django_settings.AXES_FAILURE_LIMIT - 1):
        log_in(SITE_LOGIN, "alice", "wrong")
    assert_logged_in(log_in(SITE_LOGIN, "alice", "alice-password"))


@pytest.mark.parametrize("url", [SITE_LOGIN, ADMIN_LOGIN])
def test_it_refuses_a_locked_out_login_before_hashing_the_password(
    users: dict[str, Any], hashings: list[str], url: str
) -> None:
    fail_until_locked(url, "alice")
    fail_until_locked(url, "nobody", ip="10.0.0.3")
    assert hashings, "the spy should see the hashing of the failures before the lockout"
    hashings.clear()

    for password in ["wrong", "alice-password", "another guess"]:
        assert_locked_out(log_in(url, "alice", password))
    assert_locked_out(log_in(url, "nobody", "guess", ip="10.0.0.3"))

    assert hashings == []


def test_it_leaves_api_tokens_and_signed_in_sessions_working(users: dict[str, Any]) -> None:
    alice = users["alice"]
    key = api_token_create(user=alice, name="backup script")[1]
    browser = Client()
    browser.force_login(alice)
    fail_until_locked(SITE_LOGIN, "alice", ip="127.0.0.1")

    api = Client(headers={"Authorization": f"Bearer {key}"})
    assert api.get(reverse("api-conversation-list")).status_code == 200
    assert browser.get(reverse("conversation-list")).status_code == 200


def test_it_refuses_charlie_with_alices_password_without_locking_anyone(
    users: dict[str, Any],
) -> None:
    response = log_in(SITE_LOGIN, "charlie", "alice-password")

    assert response.status_code == 200
    assert "didn't match" in response.content.decode()
    assert_logged_in(log_in(SITE_LOGIN, "alice", "alice-password"))


@pytest.mark.django_db(transaction=True)
async def test_it_locks_out_under_asgi_too(users: dict[str, Any]) -> None:
    # daphne runs the middleware chain asynchronously: axes' async path must answer the same page.
    client = AsyncClient()
    data = {"username": "alice", "password": "wrong"}
    try:
        for _ in range(django_settings.AXES_FAILURE_LIMIT - 1):
            assert (await client.post(SITE_LOGIN, data)).status_code == 200
        assert_locked_out(await client.post(SITE_LOGIN, data))
        assert_locked_out(await client.post(SITE_LOGIN, {**data, "password": "alice-password"}))
    finally:
        await close_worker_connections()

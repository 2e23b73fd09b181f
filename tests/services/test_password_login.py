"""CHAT_PASSWORD_LOGIN=0 keeps local passwords to superusers (issue 24), and the password pages
wear chatsite's look, not the admin's."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

pytestmark = pytest.mark.django_db


def log_in(username: str, password: str) -> tuple[Client, int]:
    client = Client()
    response = client.post("/accounts/login/", {"username": username, "password": password})
    return client, response.status_code


def test_with_password_login_off_a_normal_user_is_refused_and_a_superuser_is_not(
    alice: Any, settings: Any
) -> None:
    get_user_model().objects.create_superuser("root", "root@example.com", "root-password")
    signed_in_before, status = log_in("alice", "alice-password")
    assert status == 302

    settings.CHAT_PASSWORD_LOGIN = False
    _, status = log_in("alice", "alice-password")
    assert status == 200  # the form again, with its error
    _, status = log_in("root", "root-password")
    assert status == 302
    # A session a password signed in before ends too.
    assert signed_in_before.get("/").status_code == 302

    settings.CHAT_PASSWORD_LOGIN = True
    _, status = log_in("alice", "alice-password")
    assert status == 302


def test_the_password_change_pages_are_chatsites(alice: Any) -> None:
    client = Client()
    client.force_login(alice)
    page = client.get("/accounts/password_change/").content.decode()
    assert "<title>Change your password · chatsite</title>" in page
    assert "Django site admin" not in page
    changed = client.post(
        "/accounts/password_change/",
        {
            "old_password": "alice-password",
            "new_password1": "a-much-longer-new-secret",
            "new_password2": "a-much-longer-new-secret",
        },
    )
    assert changed.status_code == 302
    done = client.get(changed["Location"]).content.decode()
    assert "Password changed · chatsite" in done
    assert client.get("/account/").status_code == 200  # this session goes on

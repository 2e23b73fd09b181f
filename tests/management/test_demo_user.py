"""`manage.py demo_user`, which `make run` runs at every start (issue 30, problem 3: it reset the
demo password each time, and every demo tab was signed out)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

pytestmark = [pytest.mark.django_db]


def signed_in_demo_tab() -> Client:
    tab = Client()
    response = tab.post("/accounts/login/", {"username": "demo", "password": "demo-password"})
    assert response.status_code == 302, response.content[:300]
    return tab


def test_problem_3_the_demo_user_keeps_its_password_and_sessions_across_restarts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("DEMO_USERNAME", raising=False)
    monkeypatch.delenv("DEMO_PASSWORD", raising=False)
    call_command("demo_user")
    tab = signed_in_demo_tab()
    hashed = get_user_model().objects.get(username="demo").password

    call_command("demo_user")  # the next `make run`

    assert get_user_model().objects.get(username="demo").password == hashed
    assert tab.get("/account/").status_code == 200  # still signed in


def test_it_keeps_a_password_changed_since_unless_demo_password_asks_for_another(
    monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.delenv("DEMO_PASSWORD", raising=False)
    call_command("demo_user")
    demo = get_user_model().objects.get(username="demo")
    demo.set_password("chosen-on-the-account-page")
    demo.save()
    capsys.readouterr()

    call_command("demo_user")
    assert (
        get_user_model().objects.get(username="demo").check_password("chosen-on-the-account-page")
    )
    assert "demo-password" not in capsys.readouterr().out

    monkeypatch.setenv("DEMO_PASSWORD", "given-explicitly")
    call_command("demo_user")
    assert get_user_model().objects.get(username="demo").check_password("given-explicitly")
    assert "given-explicitly" in capsys.readouterr().out

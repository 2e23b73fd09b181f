"""Password reset by email (issue 24): offered only with an email server configured, in chatsite's
look; the link works once."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.core import mail
from django.test import Client

pytestmark = pytest.mark.django_db


def test_without_an_email_server_there_is_no_reset(alice: Any) -> None:
    assert Client().get("/accounts/password_reset/").status_code == 404
    assert "Forgot your password" not in Client().get("/accounts/login/").content.decode()


def test_a_reset_link_sets_a_new_password_once(alice: Any, settings: Any) -> None:
    settings.CHAT_PASSWORD_RESET = True
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    assert "Forgot your password" in Client().get("/accounts/login/").content.decode()
    page = Client().get("/accounts/password_reset/").content.decode()
    assert "<title>Reset your password · chatsite</title>" in page

    sent = Client().post("/accounts/password_reset/", {"email": "alice@example.com"})
    assert sent.status_code == 302
    (email,) = mail.outbox
    assert email.subject == "Reset your chatsite password" and "alice" in email.body
    link = re.search(r"http://testserver(/accounts/reset/\S+/)", email.body)
    assert link, email.body

    browser = Client()
    form = browser.get(link[1], follow=True)
    assert "Choose a new password" in form.content.decode()
    new = "a-new-and-long-passphrase"
    done = browser.post(form.redirect_chain[-1][0], {"new_password1": new, "new_password2": new})
    assert done.status_code == 302
    signed_in = Client().post("/accounts/login/", {"username": "alice", "password": new})
    assert signed_in.status_code == 302
    again = Client().get(link[1], follow=True).content.decode()
    assert "cannot be used" in again  # the link worked once

"""Every response carries a Content-Security-Policy without inline scripts, and a Permissions-Policy."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

pytestmark = [pytest.mark.django_db]


@pytest.mark.parametrize("debug", [False, True], ids=["debug-off", "debug-on"])
@pytest.mark.parametrize("page", ["conversation-list", "api-tokens", "login", "api-docs"])
def test_pages_forbid_inline_scripts_and_unused_features(
    alice: Any, settings: Any, page: str, debug: bool
) -> None:
    settings.DEBUG = debug
    browser = Client()
    if page != "login":
        browser.force_login(alice)
    response = browser.get(reverse(page))
    assert response.status_code == 200
    policy = dict(
        part.strip().split(" ", 1) for part in response["Content-Security-Policy"].split(";")
    )
    assert policy["script-src"] == "'self'", "no inline scripts or handlers"
    assert policy["frame-ancestors"] == "'none'" and policy["object-src"] == "'none'"
    assert "camera=()" in response["Permissions-Policy"]
    html = response.content.decode()
    assert " onfocus=" not in html and " onclick=" not in html
    assert "<script>" not in html, "every script is a file from this server"

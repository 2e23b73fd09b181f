"""Single sign-on in a real browser: Debian's chromium, driven by Playwright, from chatsite's
login page to the provider's (panva's oidc-provider) login form and back, under chatsite's
Content-Security-Policy, into a conversation whose model picker shows the provider's groups'
models."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect, sync_playwright

from tests.support.oidc_provider import (
    NEEDS_NODE,
    chatsite_env,
    chatsite_serves_single_sign_on,
    oidc_provider,
)
from tests.support.servers import NEEDS_SHARED_SERVICES, free_port, servers

pytestmark = [
    pytest.mark.browser,
    pytest.mark.processes,
    NEEDS_SHARED_SERVICES,
    NEEDS_NODE,
    pytest.mark.django_db(transaction=True),
]

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
MODELS = [
    {"slug": "open", "backend": "scripted"},
    {"slug": "team-only", "backend": "scripted", "groups": ["team"]},
]


def test_a_person_signs_in_with_the_provider_and_gets_their_groups_models(
    tmp_path: Path, settings: Any
) -> None:
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    if not chatsite_serves_single_sign_on():
        pytest.skip("chatsite.settings and chatsite.urls do not include single sign-on")
    port = free_port()
    env = {**chatsite_env(f"http://127.0.0.1:{port}"), "CHAT_MODELS": json.dumps(MODELS)}
    with (
        servers(1, tmp_path, **env) as (site,),
        oidc_provider(tmp_path, redirect_uris=[f"{site.origin}/oidc/callback/"], port=port) as idp,
        sync_playwright() as playwright,
    ):
        idp.add_user("erin", groups=["team"])
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu", "--no-first-run"]
        )
        try:
            page = browser.new_page()
            refused: list[str] = []
            page.on("console", lambda message: refused.append(message.text))
            page.goto(f"{site.origin}/accounts/login/")
            page.get_by_role("link", name="Sign in with Corp ID").click()
            page.fill("input[name=login]", "erin")
            page.fill("input[name=password]", "any password")
            page.get_by_role("button", name="Sign-in").click()
            expect(page).to_have_url(f"{site.origin}/", timeout=15_000)

            page.get_by_role("button", name="New conversation").click()
            picker = page.locator("#send-form select.model-picker option")
            expect(picker).to_have_count(2, timeout=15_000)
            assert [picker.nth(i).get_attribute("value") for i in range(2)] == [
                "open",
                "team-only",
            ]
            assert not [text for text in refused if "Content Security Policy" in text]
        finally:
            browser.close()

    erin = get_user_model().objects.get(username="erin")
    assert list(erin.groups.values_list("name", flat=True)) == ["team"]

"""Feedback in Chromium: alice gives a reply a thumbs-down and a reason from the keyboard, sees it
again after a reload, and it is in the admin's list and both JSONL exports.

The server, its database, the browser and alice's login are tests/pages/test_browser.py's
fixtures.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, expect

from tests.pages import test_browser
from tests.pages.test_browser import Server, home, new_conversation, send

pytestmark = [pytest.mark.browser]

server = test_browser.server
browser = test_browser.browser
alice_session = test_browser.alice_session
alice = test_browser.alice

REASON = "It <b>ignored</b> the question"

# Runs in the server's environment: a superuser for the admin.
SUPERUSER_SCRIPT = """
import json, django
django.setup()
from django.contrib.auth import get_user_model
get_user_model().objects.create_superuser("root", "root@example.com", "root-password")
print(json.dumps("ok"))
"""


def test_a_thumbs_down_with_a_reason_reaches_the_admin_and_the_exports(
    server: Server, alice: BrowserContext, browser: Browser
) -> None:
    page = home(alice, server.base)
    new_conversation(page)
    send(page, "Say something")
    reply = page.locator("#messages .message.assistant.status-complete").last
    expect(reply).to_be_visible()
    down = reply.get_by_role("button", name="Bad reply")
    expect(down).to_have_attribute("aria-pressed", "false")

    # From the keyboard: the thumbs-down, then the reason field it opens (focused), then Save.
    down.focus()
    page.keyboard.press("Enter")
    expect(down).to_have_attribute("aria-pressed", "true")
    reason = reply.get_by_label("What was wrong with it?")
    expect(reason).to_be_focused()
    page.keyboard.type(REASON)
    page.keyboard.press("Tab")
    expect(reply.get_by_role("button", name="Save reason")).to_be_focused()
    page.keyboard.press("Enter")
    expect(reply.get_by_role("status")).to_have_text("Reason saved.")

    # A reload shows it again, after the socket re-renders the reply it opens on.
    page.reload()
    expect(page.locator("section.chat[data-socket=open]")).to_be_visible()
    reply = page.locator("#messages .message.assistant").last
    expect(reply.get_by_role("button", name="Bad reply")).to_have_attribute("aria-pressed", "true")
    expect(reply.get_by_role("button", name="Good reply")).to_have_attribute(
        "aria-pressed", "false"
    )
    expect(reply.get_by_label("What was wrong with it?")).to_have_value(REASON)
    expect(reply.get_by_label("What was wrong with it?")).not_to_be_focused()

    # alice's own export, with her session.
    exported = page.request.get(f"{server.base}/api/feedback.jsonl")
    assert exported.ok
    records = [json.loads(line) for line in exported.text().splitlines()]
    assert [(r["rating"], r["reason"]) for r in records] == [("down", REASON)]
    assert records[0]["prompt"][-1] == {"role": "user", "content": "Say something"}
    assert records[0]["reply"] and records[0]["model"]

    # The admin lists it among the thumbs-down, and its action downloads it.
    server.run_script(SUPERUSER_SCRIPT)
    staff = browser.new_context()
    try:
        admin = staff.new_page()
        admin.goto(f"{server.base}/admin/login/?next=/admin/conversations/feedback/")
        admin.fill("#id_username", "root")
        admin.fill("#id_password", "root-password")
        admin.get_by_role("button", name="Log in").click()
        admin.get_by_role("link", name="Thumbs down").click()
        expect(admin.locator("#result_list")).to_contain_text(REASON)
        expect(admin.locator("#approval")).to_contain_text("0%")
        admin.locator("#action-toggle").check()
        admin.select_option("select[name=action]", "export_jsonl")
        with admin.expect_download() as download:
            admin.locator('button[name="index"]').first.click()  # the actions' Go
        lines = Path(download.value.path()).read_text(encoding="utf-8").splitlines()
        assert [json.loads(line)["reason"] for line in lines] == [REASON]
    finally:
        staff.close()

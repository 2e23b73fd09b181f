"""Importing from the settings page, in Chromium: choose a file, import, follow the report's link.

The server, its database, the browser and alice's login are tests/pages/test_browser.py's
fixtures, imported here.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import BrowserContext, expect

from tests.imports.sources import chatgpt_branched, chatgpt_zip
from tests.pages import test_browser
from tests.pages.test_browser import Server, home
from tests.pages.test_page_ux_browser import serious_violations

pytestmark = [pytest.mark.browser]

server = test_browser.server
browser = test_browser.browser
alice_session = test_browser.alice_session
alice = test_browser.alice


def test_it_imports_a_chatgpt_export_and_links_to_it(server: Server, alice: BrowserContext) -> None:
    page = home(alice, server.base)
    page.goto(f"{server.base}/settings/tokens/")
    assert serious_violations(page) == []
    chatgpt = chatgpt_branched()
    chatgpt["title"] = "<b>Arithmetic</b>"

    page.get_by_label("Export file").set_input_files(
        {
            "name": "chatgpt-export.zip",
            "mimeType": "application/zip",
            "buffer": chatgpt_zip(chatgpt),
        }
    )
    page.get_by_label("Format").select_option("chatgpt")
    page.get_by_role("button", name="Import").click()

    expect(page.locator("#import-summary")).to_have_text(
        "Imported 1 conversation from ChatGPT; 1 note below."
    )
    assert serious_violations(page) == []
    page.get_by_role("link", name="<b>Arithmetic</b>").click()
    expect(page.locator("#conversation-heading")).to_have_text("<b>Arithmetic</b>")
    expect(page.locator("#messages .message.assistant").last).to_contain_text("It is 7.")
    expect(page.locator("#messages")).not_to_contain_text("And 3+3?")

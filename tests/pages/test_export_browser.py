"""Downloads from the page, in Chromium: one conversation as Markdown, JSON or text from its menu,
and every conversation at once from the settings page, which follows the export's pages.

The server, its database, the browser and alice's login are test_browser.py's fixtures, imported
here; this module makes the export's pages tiny, so "every conversation" spans several.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from tests.pages import test_browser
from tests.pages.test_browser import Server, home, new_conversation, send

pytestmark = [pytest.mark.browser]

server = test_browser.server
browser = test_browser.browser
alice_session = test_browser.alice_session
alice = test_browser.alice


@pytest.fixture(scope="module", autouse=True)
def small_export_pages() -> Iterator[None]:
    # Autouse, so it runs before the module's `server` copies os.environ into daphne's env.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CHAT_EXPORT_PAGE_BYTES", "1024")
        patch.setenv("CHAT_SENDS_PER_MINUTE", "1000")
        patch.setenv("CHAT_CONVERSATIONS_PER_MINUTE", "1000")
        yield


def chat(page: Page, text: str) -> None:
    """Send, and stop the (long, scripted) reply once it writes: only the history matters."""
    send(page, text)
    reply = page.locator("#messages .message.assistant").last
    expect(reply).to_have_attribute("data-status", "streaming")
    page.locator("#stop-button").click()
    expect(reply).to_have_attribute("data-status", "cancelled")


def test_it_downloads_a_conversation_from_its_menu(
    server: Server, alice: BrowserContext, tmp_path: Path
) -> None:
    page = home(alice, server.base)
    new_conversation(page)
    chat(page, "Tell me about sockets")
    page.locator(".conversation-menu summary").click()

    for fmt, check in (
        ("markdown", lambda text: "## User" in text and "Tell me about sockets" in text),
        (
            "json",
            lambda text: json.loads(text)["messages"][0]["content"] == "Tell me about sockets",
        ),
        ("txt", lambda text: "[user]" in text and "Tell me about sockets" in text),
    ):
        with page.expect_download() as download:
            page.locator(f'.conversation-menu a[data-export="{fmt}"]').click()
        saved = tmp_path / download.value.suggested_filename
        download.value.save_as(saved)
        assert check(saved.read_text()), fmt


def test_it_downloads_every_conversation_across_the_export_s_pages(
    server: Server, alice: BrowserContext, tmp_path: Path
) -> None:
    page = home(alice, server.base)
    titles = [f"History number {i}" for i in range(4)]
    for title in titles:
        new_conversation(page)
        chat(page, title)

    page.goto(f"{server.base}/settings/tokens/")
    with page.expect_download() as download:
        page.get_by_role("button", name="Download all conversations").click()
    expect(page.locator("#export-all-status")).to_have_text("Downloaded.")
    saved = tmp_path / download.value.suggested_filename
    download.value.save_as(saved)
    exported = [json.loads(line) for line in saved.read_text().splitlines()]
    assert download.value.suggested_filename == "conversations.jsonl"
    assert len({c["id"] for c in exported}) == len(exported), "no conversation twice"
    assert set(titles) <= {c["title"] for c in exported}, "every page was followed"

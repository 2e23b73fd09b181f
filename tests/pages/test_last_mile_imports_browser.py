"""Problem 2 of the last mile, in Chromium: exports imported through the settings page show
without loss. A sharded ChatGPT zip brings both shards' conversations; a searched reply shows no
private-use markers, its sources as links and the code after a citation as code; an Open WebUI
reply's reasoning is a collapsed "Reasoning" block; unfinished replies are marked interrupted.

The server, its database, the browser and alice's login are tests/pages/test_browser.py's
fixtures, imported here.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from tests.imports.sources import as_json, chatgpt_branched
from tests.imports.sources_last_mile import (
    chatgpt_searched,
    chatgpt_sharded_zip,
    openwebui_reasoning_chat,
)
from tests.pages import test_browser
from tests.pages.test_browser import Server, home
from tests.pages.test_page_ux_browser import serious_violations

pytestmark = [pytest.mark.browser]

server = test_browser.server
browser = test_browser.browser
alice_session = test_browser.alice_session
alice = test_browser.alice

PRIVATE_USE = re.compile("[\ue000-\uf8ff]")


def import_through_the_page(page: Page, base: str, name: str, data: bytes, summary: str) -> None:
    page.goto(f"{base}/settings/tokens/")
    page.get_by_label("Export file").set_input_files(
        {"name": name, "mimeType": "application/octet-stream", "buffer": data}
    )
    page.get_by_role("button", name="Import").click()
    expect(page.locator("#import-summary")).to_contain_text(summary)


def test_problem_2_imports_keep_shards_citations_reasoning_and_interruptions(
    server: Server, alice: BrowserContext
) -> None:
    page = home(alice, server.base)
    searched = chatgpt_searched("c0ffee00-0000-4000-8000-0000000000b2")
    shards = chatgpt_sharded_zip(
        [chatgpt_branched("c0ffee00-0000-4000-8000-0000000000b1")], [searched]
    )

    import_through_the_page(
        page, server.base, "chatgpt-export.zip", shards, "Imported 2 conversations from ChatGPT"
    )

    # Both shards' conversations are listed in the report.
    expect(page.get_by_role("link", name="Arithmetic")).to_be_visible()
    page.get_by_role("link", name="Trip weather").click()
    expect(page.locator("#conversation-heading")).to_have_text("Trip weather")
    messages = page.locator("#messages")
    cited = messages.locator(".message.assistant").first
    expect(cited).to_contain_text("Lisbon is mild in May. [1]")
    assert not PRIVATE_USE.search(messages.inner_text())
    assert not PRIVATE_USE.search(page.content())
    expect(cited.locator("pre code.language-python")).to_have_text("print('sunny')\n")
    expect(cited.get_by_role("link", name="Porto [travel] guide")).to_have_attribute(
        "href", "https://travel.example/porto"
    )
    # The reply still being written when ChatGPT exported it is marked as an unfinished one.
    unfinished = messages.locator(".message.assistant").last
    expect(unfinished).to_have_attribute("data-status", "interrupted")
    expect(unfinished.locator(".marker.interrupted")).to_have_text(
        "Interrupted: it was not finished where it was exported from."
    )
    assert serious_violations(page) == []

    import_through_the_page(
        page,
        server.base,
        "open-webui-chats.json",
        as_json([openwebui_reasoning_chat("0be11e00-0000-4000-8000-0000000000b3")]),
        "Imported 1 conversation from Open WebUI",
    )
    page.get_by_role("link", name="Thinking colours").click()
    expect(page.locator("#conversation-heading")).to_have_text("Thinking colours")
    answer = page.locator("#messages .message.assistant").first
    reasoning = answer.locator("details.reasoning")
    expect(reasoning.locator("summary")).to_have_text("Reasoning")
    expect(reasoning).not_to_have_attribute("open", "")
    expect(reasoning.locator(".reasoning-body")).to_be_hidden()
    expect(answer.locator(".body")).to_have_text("Green.")
    expect(answer).not_to_contain_text("<details")
    reasoning.locator("summary").click()
    expect(reasoning.locator(".reasoning-body")).to_contain_text("Green & calm fits.")
    expect(reasoning.locator(".reasoning-body em")).to_have_text("one")
    last = page.locator("#messages .message.assistant").last
    expect(last).to_have_attribute("data-status", "interrupted")
    expect(last.locator(".marker.interrupted")).to_have_text(
        "Interrupted: it was not finished where it was exported from."
    )
    assert serious_violations(page) == []

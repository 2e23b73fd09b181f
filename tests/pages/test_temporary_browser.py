"""Temporary chats in Chromium: started from the sidebar, shown as such, kept through a reload,
and gone once their tab leaves, while the tokens their replies used stay in the ledger.

The server, its database, the browser and alice's login are tests/pages/test_browser.py's
fixtures; this module's settings come first, before its `server` copies os.environ.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from tests.pages import test_browser
from tests.pages.test_browser import Server, home, latest_reply_id, send

pytestmark = [pytest.mark.browser]

server = test_browser.server
browser = test_browser.browser
alice_session = test_browser.alice_session
alice = test_browser.alice

# Short replies: the module is about what happens after them.
REPLY_TOKENS = 12
MODELS = [
    {
        "slug": "brief",
        "name": "Brief",
        "backend": "scripted",
        "options": {"tokens": REPLY_TOKENS, "delay_ms": 5},
        "max_tokens": 400,
    }
]

# Runs in the server's environment: whether the conversation exists, and alice's usage so far.
STATE_SCRIPT = """
import json, sys, django
django.setup()
from django.db.models import Sum
from conversations.models import Conversation, TokenUsage
usage = TokenUsage.objects.filter(user__username="alice").aggregate(
    replies=Sum("replies"), tokens=Sum("completion_tokens")
)
print(json.dumps({"exists": Conversation.objects.filter(pk=sys.argv[1]).exists(), **usage}))
"""


@pytest.fixture(scope="module", autouse=True)
def short_grace_and_replies() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        # Long enough for a reload to reconnect, short enough not to keep the test waiting.
        patch.setenv("CHAT_TEMPORARY_GRACE_S", "1")
        patch.setenv("CHAT_MODELS", json.dumps(MODELS))
        patch.setenv("CHAT_CONVERSATIONS_PER_MINUTE", "1000")
        yield


def state(server: Server, conversation_id: str) -> dict[str, Any]:
    result: dict[str, Any] = server.run_script(STATE_SCRIPT, conversation_id)
    return result


def wait_until_gone(server: Server, conversation_id: str, timeout: float = 30) -> dict[str, Any]:
    """The server's state once the conversation is deleted (polled: the deletion is the server's
    own, after its grace period); fails if it is still there after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        now = state(server, conversation_id)
        if not now["exists"]:
            return now
        assert time.monotonic() < deadline, "the temporary chat was not deleted"
        time.sleep(0.2)


def conversation_id_of(page: Page) -> str:
    return page.url.rstrip("/").rsplit("/", 1)[-1]


def temporary_chat(page: Page) -> str:
    page.get_by_role("button", name="Temporary chat").click()
    expect(page.locator("section.chat[data-socket=open]")).to_be_visible()
    return conversation_id_of(page)


def test_a_temporary_chat_is_shown_as_such_and_gone_once_its_tab_leaves_its_usage_kept(
    server: Server, alice: BrowserContext
) -> None:
    page = home(alice, server.base)
    conversation_id = temporary_chat(page)
    expect(page.locator("#temporary-note")).to_have_text("Temporary chat")
    before = state(server, conversation_id)
    send(page, "Something I will not keep")
    reply = page.locator(f"#{latest_reply_id(page)}")
    expect(reply).to_have_attribute("data-status", "complete")
    link = page.locator(f"#conversation-link-{conversation_id}")
    expect(link.locator("xpath=..").locator(".badge.temporary")).to_have_text("Temporary")

    # A reload opens a new tab within the grace period: the chat is still there.
    page.reload()
    expect(page.locator("section.chat[data-socket=open]")).to_be_visible()
    expect(page.locator("#messages .message.user .body")).to_have_text("Something I will not keep")
    assert state(server, conversation_id)["exists"]

    page.close()
    after = wait_until_gone(server, conversation_id)
    # The ledger keeps what the reply used: budgets never give anything back.
    assert after["replies"] == (before["replies"] or 0) + 1
    # Its reply's tokens, and its title's if the model wrote one before the chat went.
    assert after["tokens"] >= (before["tokens"] or 0) + REPLY_TOKENS


def test_a_temporary_chat_open_in_another_tab_stays_until_that_one_leaves_too(
    server: Server, alice: BrowserContext
) -> None:
    first = home(alice, server.base)
    conversation_id = temporary_chat(first)
    send(first, "Kept while a tab is open")
    expect(first.locator(f"#{latest_reply_id(first)}")).to_have_attribute("data-status", "complete")
    second = test_browser.open_tab(alice, first.url)

    first.close()
    # The second tab answers for it: still there well past the grace period, shown as before.
    time.sleep(3)
    assert state(server, conversation_id)["exists"]
    second.reload()
    expect(second.locator("#messages .message.user .body")).to_have_text("Kept while a tab is open")

    second.close()
    wait_until_gone(server, conversation_id)


def test_new_conversation_is_not_temporary_and_stays_after_its_tab_leaves(
    server: Server, alice: BrowserContext
) -> None:
    page = home(alice, server.base)
    conversation_id = conversation_id_of_new(page)
    expect(page.locator("#temporary-note")).to_have_count(0)
    send(page, "Keep this one")
    expect(page.locator(f"#{latest_reply_id(page)}")).to_have_attribute("data-status", "complete")
    page.close()
    time.sleep(3)  # past the grace period that would have deleted a temporary chat
    assert state(server, conversation_id)["exists"]


def conversation_id_of_new(page: Page) -> str:
    test_browser.new_conversation(page)
    return conversation_id_of(page)

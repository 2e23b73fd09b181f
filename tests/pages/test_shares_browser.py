"""A share link in a real browser: alice makes it on her page, a signed-out visitor reads it.

The server, its database, the browser and alice's login are test_browser.py's fixtures, imported
here as tests/pages/test_models_browser.py does.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, BrowserContext, expect

from tests.pages import test_browser
from tests.pages.test_browser import Server

pytestmark = pytest.mark.browser

# test_browser.py's fixtures, made this module's: a server, a browser and a logged-in alice.
server = test_browser.server
browser = test_browser.browser
alice_session = test_browser.alice_session
alice = test_browser.alice

# Runs in the server's environment: a conversation of alice's with a question and a reply.
CHAT_SCRIPT = """
import json, sys, django
django.setup()
from django.contrib.auth import get_user_model
from conversations.models import Conversation, Message
owner = get_user_model().objects.get(username="alice")
chat = Conversation.objects.create(owner=owner, title="Sockets, explained")
Message.objects.create(conversation=chat, role="user", content="What is a socket?")
Message.objects.create(
    conversation=chat, role="assistant", content="An **endpoint**. <script>window.bad = 1</script>"
)
print(json.dumps(str(chat.pk)))
"""


@pytest.fixture
def visitor(browser: Browser) -> Iterator[BrowserContext]:
    """A browser that never signed in; a script error on its pages fails the test."""
    context = browser.new_context(viewport={"width": 1100, "height": 720})
    errors: list[str] = []
    context.on("weberror", lambda error: errors.append(str(error.error)))
    yield context
    context.close()
    assert not errors, errors


def test_a_signed_out_visitor_reads_the_shared_transcript_until_it_is_revoked(
    server: Server, alice: BrowserContext, visitor: BrowserContext
) -> None:
    chat = server.run_script(CHAT_SCRIPT)
    owner_page = alice.new_page()
    owner_page.goto(f"{server.base}/conversations/{chat}/shares/")
    owner_page.get_by_role("button", name="Create share link").click()
    link = owner_page.locator("#new-share-url")
    expect(link).to_be_visible()
    url = link.input_value()
    assert url.startswith(f"{server.base}/s/")

    page = visitor.new_page()
    response = page.goto(url)
    assert response is not None and response.status == 200
    expect(page.get_by_role("heading", name="Sockets, explained")).to_be_visible()
    expect(page.locator("article.message.user .body")).to_have_text("What is a socket?")
    reply = page.locator("article.message.assistant .body")
    expect(reply.locator("strong")).to_have_text("endpoint")
    expect(reply).to_contain_text("<script>window.bad = 1</script>")  # shown as text
    assert page.evaluate("window.bad") is None
    assert page.locator("#sidebar, #send-form, textarea").count() == 0
    expect(page.get_by_text("alice")).to_have_count(0)

    owner_page.get_by_role("button", name="Revoke").click()
    expect(owner_page.get_by_text("revoked")).to_be_visible()
    response = page.reload()
    assert response is not None and response.status == 404

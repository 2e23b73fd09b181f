"""Search as you type, in Chromium: results come without pressing Enter, a click lands on the
message, and clearing the box brings the conversations back.

The server, its database, the browser and alice's login are test_browser.py's fixtures, imported
here as tests/pages/test_shares_browser.py does.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import BrowserContext, expect

from tests.pages import test_browser
from tests.pages.test_browser import Server

pytestmark = pytest.mark.browser

server = test_browser.server
browser = test_browser.browser
alice_session = test_browser.alice_session
alice = test_browser.alice

# Runs in the server's environment: a long conversation of alice's whose one message about the
# zeppelin is far above its end, where the page opens; and one of charlie's about it too.
SEED_SCRIPT = """
import json, django
django.setup()
from django.contrib.auth import get_user_model
from conversations.models import Conversation, Message
User = get_user_model()
alice, charlie = User.objects.get(username="alice"), User.objects.get(username="charlie")
chat = Conversation.objects.create(owner=alice, title="Travel plans")
previous = None
for i in range(40):
    text = "Shall we take the <b>zeppelin</b> to Lisbon?" if i == 3 else f"Message {i} about trains"
    previous = Message.objects.create(
        conversation=chat, parent=previous, role="user" if i % 2 == 0 else "assistant", content=text
    )
    if i == 3:
        target = previous
Conversation.objects.filter(pk=chat.pk).update(current_leaf=previous)
other = Conversation.objects.create(owner=charlie, title="Charlie's zeppelin")
Message.objects.create(conversation=other, role="user", content="my zeppelin")
print(json.dumps({"url": chat.get_absolute_url(), "target": f"msg-{target.pk}"}))
"""


def test_results_come_as_you_type_and_lead_to_the_message(
    server: Server, alice: BrowserContext
) -> None:
    seeded = server.run_script(SEED_SCRIPT)
    page = alice.new_page()
    page.goto(f"{server.base}/")
    results = page.locator("#search-results .search-hit")
    listed = page.locator("#conversation-list")
    expect(listed).to_contain_text("Travel plans")

    page.locator("#search-box").press_sequentially("zeppe", delay=40)  # no Enter

    expect(results).to_have_count(1)
    expect(results.first).to_contain_text("Travel plans")
    expect(results.first.locator("mark")).to_have_text("zeppelin")
    expect(results.first).to_contain_text("<b>zeppelin</b>")  # shown as text, not markup
    expect(listed).to_be_hidden()

    results.first.get_by_role("link").click()

    expect(page).to_have_url(f"{server.base}{seeded['url']}#{seeded['target']}")
    target = page.locator(f"#{seeded['target']}")
    expect(target).to_be_in_viewport()
    expect(target).to_have_css("outline-style", "solid")  # :target marks it
    expect(page.locator("#messages .message").last).not_to_be_in_viewport()

    box = page.locator("#search-box")
    box.press_sequentially("zeppelin", delay=20)
    expect(results).to_have_count(1)
    box.press("Escape")  # clears the box; the conversations come back
    expect(box).to_have_value("")
    expect(page.locator("#search-results")).to_be_empty()
    expect(listed).to_be_visible()
    expect(listed).to_contain_text("Travel plans")


def test_nothing_matches_says_so(server: Server, alice: BrowserContext) -> None:
    page = alice.new_page()
    page.goto(f"{server.base}/")
    page.locator("#search-box").press_sequentially("qwxyz", delay=20)
    expect(page.locator("#search-results")).to_contain_text("No conversation matches “qwxyz”.")
    page.locator("#search-box").fill("")
    expect(page.locator("#search-results")).to_be_empty()


# Its word is not the first test's: the module's tests share the server's database, in any order.
FILTERS_SEED = """
import django
django.setup()
from datetime import datetime, timezone
from django.contrib.auth import get_user_model
from conversations.models import Conversation, Message
User = get_user_model()
alice, charlie = User.objects.get(username="alice"), User.objects.get(username="charlie")
for owner, title, model, when, text in [
    (alice, "Small airships", "smollm2", "2026-03-02", "The **dirigible** is in [the docs](https://x.example)"),
    (alice, "Big airships", "qwen-7b", "2026-03-02", "the dirigible"),
    (alice, "Old airships", "smollm2", "2025-01-10", "the dirigible"),
    (charlie, "Charlie's airships", "smollm2", "2026-03-02", "the dirigible"),
]:
    chat = Conversation.objects.create(owner=owner, title=title, model_slug=model)
    Message.objects.create(conversation=chat, role="user", content=text)
    moment = datetime.fromisoformat(when).replace(tzinfo=timezone.utc)
    Conversation.objects.filter(pk=chat.pk).update(updated_at=moment)
print("{}")
"""


def test_filters_find_the_right_conversations_and_a_bad_one_says_why(
    server: Server, alice: BrowserContext
) -> None:
    server.run_script(FILTERS_SEED)
    page = alice.new_page()
    page.goto(f"{server.base}/")
    box = page.locator("#search-box")
    results = page.locator("#search-results .search-hit")

    box.fill("dirigible model:smollm2 after:2026-01-01")

    expect(results).to_have_count(1)
    expect(results.first.locator(".hit-title")).to_have_text("Small airships")
    # The snippet is the message's text as it reads, not its Markdown.
    expect(results.first.locator(".hit-snippet")).to_have_text("The dirigible is in the docs")

    box.fill("model:smollm2")  # a filter alone lists what holds it, newest first
    expect(results).to_have_count(2)
    expect(results.locator(".hit-title")).to_have_text(["Small airships", "Old airships"])

    box.fill("dirigible before:last-week")
    status = page.locator("#search-results [role=alert]")
    expect(status).to_have_text("“before:” takes a date as YYYY-MM-DD, not “last-week”.")
    expect(results).to_have_count(0)

    box.fill("dirigible before:2026-01-01")
    expect(results).to_have_count(1)
    expect(results.first.locator(".hit-title")).to_have_text("Old airships")

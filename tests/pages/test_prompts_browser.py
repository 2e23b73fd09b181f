"""The prompt library in Chromium: "/" in the composer lists alice's prompts and her group's,
filtered as she types and chosen by keyboard; a prompt's {{name}} variables are asked for in a
form, put in as plain text, and the filled prompt is sent: an echoing scripted engine writes back
the message it received, and the stored message is the filled text.

The server, its database, the browser and alice's login are tests/pages/test_browser.py's
fixtures; this module's model comes first, before its `server` copies os.environ.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from tests.pages import test_browser
from tests.pages.test_browser import Server, home, new_conversation
from tests.pages.test_page_ux_browser import serious_violations

pytestmark = [pytest.mark.browser]

server = test_browser.server
browser = test_browser.browser
alice_session = test_browser.alice_session
alice = test_browser.alice

MODELS = [
    {
        "slug": "echo",
        "name": "Echo",
        "backend": "scripted",
        "options": {"echo": True, "delay_ms": 5},
        "max_tokens": 400,
    }
]

# Runs in the server's environment: alice's prompts, one shared with her team by bob (made
# here), and charlie's, which she must never see.
LIBRARY_SCRIPT = """
import json, django
django.setup()
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from conversations.services.saved_prompts import prompt_create
User = get_user_model()
alice, charlie = User.objects.get(username="alice"), User.objects.get(username="charlie")
bob = User.objects.create_user("bob", password="bob-password")
team = Group.objects.create(name="team")
team.user_set.add(alice, bob)
prompt_create(owner=alice, title="Summarise", text="Summarise {{topic}} for {{ audience }}, briefly.")
prompt_create(owner=alice, title="Translate", text="Translate into French:")
prompt_create(owner=bob, title="Standup notes", text="Yesterday, today, blockers.", group=team)
prompt_create(owner=charlie, title="Charlie's secret", text="Hush")
print(json.dumps(True))
"""


@pytest.fixture(scope="module", autouse=True)
def echoing_model() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CHAT_MODELS", json.dumps(MODELS))
        patch.setenv("CHAT_SENDS_PER_MINUTE", "1000")
        patch.setenv("CHAT_CONVERSATIONS_PER_MINUTE", "1000")
        yield


@pytest.fixture(scope="module")
def library(server: Server) -> None:
    server.run_script(LIBRARY_SCRIPT)


def options(page: Page) -> object:
    return page.get_by_role("listbox", name="Saved prompts").get_by_role("option")


def test_a_prompt_with_variables_is_filled_and_sent(
    server: Server, alice: BrowserContext, library: None
) -> None:
    page = home(alice, server.base)
    new_conversation(page)
    box = page.locator("#message-box")
    box.press("/")

    # Hers and her team's, by title; never charlie's.
    expect(options(page)).to_have_count(3)
    expect(options(page).first).to_contain_text("Standup notes")
    expect(options(page).first).to_contain_text("from bob")
    expect(page.locator("#prompt-menu")).not_to_contain_text("Charlie")

    box.press_sequentially("sum")
    expect(options(page)).to_have_count(1)
    expect(options(page).first).to_have_attribute("aria-selected", "true")
    box.press("Backspace")
    box.press("Backspace")
    box.press("Backspace")  # "/" again: all three
    expect(options(page)).to_have_count(3)
    box.press("ArrowDown")
    summarise = options(page).nth(1)
    expect(summarise).to_contain_text("Summarise")
    expect(summarise).to_have_attribute("aria-selected", "true")
    expect(options(page).first).to_have_attribute("aria-selected", "false")
    assert box.get_attribute("aria-activedescendant") == summarise.get_attribute("id")
    expect(box).to_be_focused()  # the box keeps the keyboard
    box.press("ArrowUp")
    box.press("ArrowUp")  # round to the last, Translate
    expect(options(page).nth(2)).to_have_attribute("aria-selected", "true")
    box.press("ArrowDown")
    box.press("ArrowDown")  # round to the first, then Summarise
    expect(summarise).to_have_attribute("aria-selected", "true")
    box.press("Enter")

    dialog = page.get_by_role("dialog", name="Summarise")
    expect(dialog).to_be_visible()
    expect(page.locator("#prompt-menu")).to_be_hidden()
    assert page.locator("#messages .message.user").count() == 0  # Enter chose, it did not send
    topic = dialog.get_by_label("topic")
    expect(topic).to_be_focused()
    # Values go in as typed: markup, a replacement pattern and a variable are only text.
    topic.fill("<b>sockets</b> $& {{audience}}")
    dialog.get_by_label("audience").fill("{{topic}} engineers")
    dialog.get_by_label("audience").press("Enter")

    filled = "Summarise <b>sockets</b> $& {{audience}} for {{topic}} engineers, briefly."
    expect(dialog).to_be_hidden()
    expect(box).to_have_value(filled)
    expect(box).to_be_focused()
    box.press("Enter")

    asked = page.locator("#messages .message.user").last
    expect(asked.locator(".body")).to_have_text(filled)
    expect(asked.locator(".body b")).to_have_count(0)
    reply = page.locator("#messages .message.assistant").last
    expect(reply).to_have_attribute("data-status", "complete")
    expect(reply).to_contain_text("sockets")
    conversation = page.url.rstrip("/").rsplit("/", 1)[1]
    assert server.stored_messages(conversation)[0] == filled


def test_escape_closes_the_list_and_keeps_the_text_and_a_plain_prompt_goes_in_at_once(
    server: Server, alice: BrowserContext, library: None
) -> None:
    page = home(alice, server.base)
    new_conversation(page)
    box = page.locator("#message-box")
    box.press_sequentially("/tran")
    expect(options(page)).to_have_count(1)
    box.press("Escape")
    expect(page.locator("#prompt-menu")).to_be_hidden()
    expect(box).to_have_value("/tran")
    box.press_sequentially("s")  # still closed while the "/" text is typed on
    expect(page.locator("#prompt-menu")).to_be_hidden()

    box.fill("")
    box.press_sequentially("/tran")
    options(page).first.click()  # no variables: straight into the box
    expect(box).to_have_value("Translate into French:")
    expect(page.get_by_role("dialog")).to_have_count(0)

    # A cancelled form leaves the box as it was.
    box.fill("")
    box.press_sequentially("/summ")
    box.press("Enter")
    dialog = page.get_by_role("dialog", name="Summarise")
    expect(dialog).to_be_visible()
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    expect(box).to_have_value("/summ")
    expect(box).to_be_focused()
    assert page.locator("#messages .message.user").count() == 0


def test_axe_finds_no_serious_violations_in_the_library_the_list_and_the_form(
    server: Server, alice: BrowserContext, library: None
) -> None:
    page = home(alice, server.base)
    page.goto(server.base + "/settings/prompts/")
    expect(page.get_by_role("heading", name="Prompt library")).to_be_visible()
    assert serious_violations(page) == []

    page.goto(server.base + "/")
    new_conversation(page)
    box = page.locator("#message-box")
    box.press("/")
    expect(options(page)).to_have_count(3)
    assert serious_violations(page) == []
    box.press_sequentially("summ")
    box.press("Enter")
    expect(page.get_by_role("dialog", name="Summarise")).to_be_visible()
    assert serious_violations(page) == []

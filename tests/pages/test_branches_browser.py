"""Branches in a real browser: regenerate, edit and resend, continue, and browsing versions ("1/2").

The server, its database, the browser and alice's login are test_browser.py's fixtures, imported
here. Two scripted models write the replies: "scripted" writes 30 tokens, "short" is cut off at
the length limit after 5. The scripted engine writes the same tokens for every prompt, so where
two versions of a reply must differ, the test writes them with different models.

Retry after an error is not covered here: the scripted engine fails only when a test sets its
`fail_after` in the server's process, which a live daphne does not let a test reach.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from playwright.sync_api import BrowserContext, Locator, Page, expect

from conversations.engines.scripted import scripted_token
from tests.pages import test_browser
from tests.pages.test_browser import Server, home, new_conversation, open_tab, send

pytestmark = pytest.mark.browser

# test_browser.py's fixtures, made this module's (pytest finds fixtures among its attributes).
server = test_browser.server
browser = test_browser.browser
alice_session = test_browser.alice_session
alice = test_browser.alice

LONG_TOKENS = 30
SHORT_TOKENS = 5
MODELS = [
    {
        "slug": "scripted",
        "name": "Scripted",
        "backend": "scripted",
        "options": {"tokens": LONG_TOKENS, "delay_ms": 5},
    },
    {
        "slug": "short",
        "name": "Short",
        "backend": "scripted",
        "max_tokens": SHORT_TOKENS,
        "options": {"tokens": LONG_TOKENS, "delay_ms": 5},
    },
]
CUT_OFF = "Cut off at the length limit."

# Runs in the server's environment: a conversation's messages as stored, and its current leaf.
TREE_SCRIPT = """
import json, sys, django
django.setup()
from conversations.models import Conversation, Message
conversation = Conversation.objects.get(pk=sys.argv[1])
fields = ("id", "parent_id", "role", "content", "status")
messages = Message.objects.filter(conversation=conversation).order_by("created_at", "id")
print(json.dumps({
    "current_leaf": conversation.current_leaf_id,
    "messages": list(messages.values(*fields)),
}))
"""


@pytest.fixture(scope="module", autouse=True)
def server_settings() -> Iterator[None]:
    # Autouse, so it runs before the module's `server` copies os.environ into daphne's env.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CHAT_MODELS", json.dumps(MODELS))
        # With REDIS_URL the rate counters live in Redis, which outlives each run's fresh
        # database: alice (user 1 in every one) counts against the runs of the last minute.
        patch.setenv("CHAT_CONVERSATIONS_PER_MINUTE", "1000")
        patch.setenv("CHAT_SENDS_PER_MINUTE", "1000")
        yield


def scripted_text(tokens: int) -> str:
    return "".join(scripted_token(i) for i in range(tokens)).strip()


LONG_TEXT = scripted_text(LONG_TOKENS)
SHORT_TEXT = scripted_text(SHORT_TOKENS)


def conversation_id(page: Page) -> str:
    return page.locator("section.chat").get_attribute("data-conversation") or ""


def replies(page: Page) -> Locator:
    return page.locator("#messages .message.assistant")


def user_messages(page: Page) -> Locator:
    return page.locator("#messages .message.user")


def pick(page: Page, model: str) -> None:
    page.locator("#send-form select.model-picker").select_option(model)


def finished_reply(page: Page, *, not_id: str = "") -> Locator:
    """The last reply, once it is complete (and, with `not_id`, once it is another reply)."""
    reply = replies(page).last
    if not_id:
        expect(reply).not_to_have_id(not_id)
    expect(reply).to_have_attribute("data-status", "complete")
    expect(page.locator("#stop-button")).to_be_disabled()
    return reply


def exchange(page: Page, text: str) -> Locator:
    """Send `text` and wait for its reply to be complete."""
    before = replies(page).count()
    send(page, text)
    expect(replies(page)).to_have_count(before + 1)
    return finished_reply(page)


def version_count(message: Locator) -> Locator:
    return message.locator(".versions .version-count")


def previous_version(message: Locator) -> Locator:
    return message.get_by_role("button", name="Previous version")


def next_version(message: Locator) -> Locator:
    return message.get_by_role("button", name="Next version")


def regenerate_button(page: Page) -> Locator:
    return page.locator("#messages > article:last-of-type [data-turn=regenerate]")


def shows_reply(page: Page, reply_id: str, text: str, version: str) -> None:
    """The page shows one reply, `reply_id`, with `text` as version `version` ("1/2")."""
    expect(replies(page)).to_have_count(1)
    reply = replies(page).last
    expect(reply).to_have_id(reply_id)
    expect(reply.locator(".body")).to_have_text(text)
    expect(version_count(reply)).to_have_text(version)


def tab_until_focused(page: Page, target: Locator, *, limit: int = 20) -> None:
    """Press Tab until `target` has the focus; fail if it does not get there in `limit` presses."""
    for _ in range(limit):
        page.keyboard.press("Tab")
        if target.evaluate("element => element === document.activeElement"):
            return
    focused = page.evaluate("() => document.activeElement?.outerHTML.slice(0, 200)")
    raise AssertionError(f"Tab never reached {target}; the focus is on {focused}")


def test_it_regenerates_the_last_reply_and_browses_its_versions_in_two_tabs(
    server: Server, alice: BrowserContext
) -> None:
    page = home(alice, server.base)
    url = new_conversation(page)
    first = exchange(page, "Tell me the words")
    first_id = first.get_attribute("id") or ""
    expect(first.locator(".body")).to_have_text(LONG_TEXT)
    expect(first.locator(".versions")).to_have_count(0)  # one version: nothing to browse

    # Regenerated with the short model, so the two versions read differently.
    pick(page, "short")
    regenerate_button(page).click()
    second = finished_reply(page, not_id=first_id)
    second_id = second.get_attribute("id") or ""
    shows_reply(page, second_id, SHORT_TEXT, "2/2")
    expect(next_version(second)).to_be_disabled()

    previous_version(second).click()
    shows_reply(page, first_id, LONG_TEXT, "1/2")
    expect(previous_version(replies(page).last)).to_be_disabled()
    next_version(replies(page).last).click()
    shows_reply(page, second_id, SHORT_TEXT, "2/2")

    # The version chosen is the conversation's: a reload shows it.
    previous_version(replies(page).last).click()
    shows_reply(page, first_id, LONG_TEXT, "1/2")
    page.reload()
    expect(page.locator("section.chat[data-socket=open]")).to_be_visible()
    shows_reply(page, first_id, LONG_TEXT, "1/2")

    # A second tab follows a select made in the first, and a regenerate started there.
    other = open_tab(alice, url)
    shows_reply(other, first_id, LONG_TEXT, "1/2")
    # Marks both documents: the tabs must follow by re-rendering, not by reloading.
    for tab in (page, other):
        tab.evaluate("() => { window.notReloaded = true; }")
    next_version(replies(page).last).click()
    for tab in (page, other):
        shows_reply(tab, second_id, SHORT_TEXT, "2/2")

    pick(page, "scripted")
    regenerate_button(page).click()
    third = finished_reply(page, not_id=second_id)
    third_id = third.get_attribute("id") or ""
    for tab in (page, other):
        expect(finished_reply(tab, not_id=second_id)).to_have_id(third_id)
        shows_reply(tab, third_id, LONG_TEXT, "3/3")
        expect(user_messages(tab)).to_have_count(1)
        assert tab.evaluate("() => window.notReloaded === true"), "the tab reloaded"


def test_it_edits_the_first_message_into_a_new_branch_and_keeps_the_old_one(
    server: Server, alice: BrowserContext
) -> None:
    page = home(alice, server.base)
    new_conversation(page)
    conversation = conversation_id(page)
    exchange(page, "First question")
    exchange(page, "Second question")
    expect(user_messages(page)).to_have_count(2)
    first_question = user_messages(page).first
    first_question_id = first_question.get_attribute("id") or ""

    first_question.get_by_role("button", name="Edit").click()
    form = first_question.locator("form.edit-message")
    box = form.locator("textarea")
    expect(box).to_have_value("First question")
    expect(box).to_be_focused()
    box.fill("First question, asked better")
    form.get_by_role("button", name="Save and send").click()

    # Only the edited message and its new reply are shown: the second exchange was on the old branch.
    expect(user_messages(page)).to_have_count(1)
    edited = user_messages(page).first
    expect(edited).not_to_have_id(first_question_id)
    expect(edited.locator(".body")).to_have_text("First question, asked better")
    expect(version_count(edited)).to_have_text("2/2")
    reply = finished_reply(page)
    expect(replies(page)).to_have_count(1)
    expect(reply.locator(".body")).to_have_text(LONG_TEXT)
    expect(page.locator("#messages")).not_to_contain_text("Second question")
    expect(page.locator("form.edit-message")).to_have_count(0)

    stored = server.run_script(TREE_SCRIPT, conversation)
    by_id = {m["id"]: m for m in stored["messages"]}
    edited_id = int((edited.get_attribute("id") or "").removeprefix("msg-"))
    reply_id = int((reply.get_attribute("id") or "").removeprefix("msg-"))
    assert by_id[edited_id]["content"] == "First question, asked better", by_id
    assert by_id[edited_id]["parent_id"] is None, by_id  # a version of the first turn
    assert by_id[reply_id]["parent_id"] == edited_id, by_id
    assert stored["current_leaf"] == reply_id, stored
    # The old branch is all still there: two questions and their two replies.
    old = [m for m in stored["messages"] if m["id"] not in (edited_id, reply_id)]
    assert [(m["role"], m["content"].strip()) for m in old] == [
        ("user", "First question"),
        ("assistant", LONG_TEXT),
        ("user", "Second question"),
        ("assistant", LONG_TEXT),
    ], old
    assert [m["parent_id"] for m in old] == [None] + [m["id"] for m in old[:-1]], old

    # "Previous version" on the edited message brings the old branch back, both exchanges of it.
    previous_version(edited).click()
    expect(user_messages(page)).to_have_count(2)
    expect(user_messages(page).first).to_have_id(first_question_id)
    expect(user_messages(page).first.locator(".body")).to_have_text("First question")
    expect(version_count(user_messages(page).first)).to_have_text("1/2")
    expect(user_messages(page).last.locator(".body")).to_have_text("Second question")
    expect(replies(page)).to_have_count(2)
    expect(page.locator("#messages")).not_to_contain_text("asked better")


def test_it_continues_a_reply_cut_off_at_the_length_limit(
    server: Server, alice: BrowserContext
) -> None:
    page = home(alice, server.base)
    new_conversation(page)
    pick(page, "short")
    cut = exchange(page, "Tell me many words")
    cut_id = cut.get_attribute("id") or ""
    expect(cut.locator(".body")).to_have_text(SHORT_TEXT)
    expect(cut.locator(".marker.cut-off")).to_have_text(CUT_OFF)
    continue_button = page.locator("#messages > article:last-of-type [data-turn=continue]")
    expect(continue_button).to_have_text("Continue")

    continue_button.click()
    continued = finished_reply(page, not_id=cut_id)
    expect(replies(page)).to_have_count(1)
    text = continued.locator(".body").text_content() or ""
    assert text.strip().startswith(SHORT_TEXT), text
    assert len(text.strip()) > len(SHORT_TEXT), text
    expect(version_count(continued)).to_have_text("2/2")

    # The cut-off reply is still there, as the turn's first version.
    previous_version(continued).click()
    shows_reply(page, cut_id, SHORT_TEXT, "1/2")
    expect(replies(page).last.locator(".marker.cut-off")).to_have_text(CUT_OFF)


def test_it_regenerates_and_switches_versions_with_the_keyboard(
    server: Server, alice: BrowserContext
) -> None:
    page = home(alice, server.base)
    new_conversation(page)
    first_id = exchange(page, "Hello").get_attribute("id") or ""
    edit = user_messages(page).last.get_by_role("button", name="Edit")

    # From the message above it, Tab reaches the reply's Regenerate; Enter starts a new version.
    edit.focus()
    tab_until_focused(page, regenerate_button(page))
    page.keyboard.press("Enter")
    second = finished_reply(page, not_id=first_id)
    second_id = second.get_attribute("id") or ""
    expect(version_count(second)).to_have_text("2/2")

    edit.focus()
    tab_until_focused(page, previous_version(second))
    page.keyboard.press("Enter")
    shows_reply(page, first_id, LONG_TEXT, "1/2")
    # The list was re-rendered; focus stays on the versions of that turn, on the one it can use.
    expect(next_version(replies(page).last)).to_be_focused()

    page.keyboard.press("Enter")
    shows_reply(page, second_id, LONG_TEXT, "2/2")
    expect(previous_version(replies(page).last)).to_be_focused()

"""Issue #30's problems 5 (titles) and 6 (rough edges), each proved in Chromium.

The server, its database, the browser and alice's login are test_browser.py's fixtures, imported
here. Two scripted models write the replies: "scripted" (400 tokens, 30 ms apart: long enough to
scroll up during) and "failing", which fails after 3 tokens every time. Titles are on, without a
title model: what the embedded engine gets by default.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from tests.pages import test_browser
from tests.pages.test_browser import Server, home, new_conversation, send
from tests.pages.test_page_ux_browser import DESKTOP, PHONE, serious_violations

pytestmark = pytest.mark.browser

# test_browser.py's fixtures, made this module's (pytest finds fixtures among its attributes).
server = test_browser.server
browser = test_browser.browser
alice_session = test_browser.alice_session
alice = test_browser.alice

MODELS = [
    {"slug": "scripted", "name": "Scripted", "backend": "scripted", "max_tokens": 400},
    {"slug": "failing", "name": "Failing", "backend": "scripted", "options": {"fail_after": 3}},
]
LONG_QUESTION_CHARS = 7990  # the question, under the 8,000 limit

# Runs in the server's environment: a conversation of alice's titled argv[1], last touched 40 days
# ago, with 30 exchanges; the first question is Markdown around the word "Zanzibar".
SEED_SCRIPT = """
import json, sys, django
from datetime import timedelta
django.setup()
from django.contrib.auth import get_user_model
from django.utils import timezone
from conversations.models import Conversation, Message
alice = get_user_model().objects.get(username="alice")
conversation = Conversation.objects.create(owner=alice, title=sys.argv[1])
first = Message.objects.create(conversation=conversation, role="user", content=(
    "**Zanzibar** is an island of the `spice` trade, with [beaches](https://example.com/b) "
    + "and a very long history of trading dhows across the ocean " * 8
))
for n in range(30):
    Message.objects.create(conversation=conversation, role="assistant", status="complete",
        content=f"Answer {n}: " + "plenty of words to fill the screen " * 12)
    Message.objects.create(conversation=conversation, role="user", content=f"Question {n + 1}")
Conversation.objects.filter(pk=conversation.pk).update(
    updated_at=timezone.now() - timedelta(days=40)
)
print(json.dumps({
    "id": str(conversation.pk), "url": conversation.get_absolute_url(), "first": first.pk,
}))
"""

# Runs in the server's environment: a conversation's row (None once deleted) and its replies.
ROW_SCRIPT = """
import json, sys, django
django.setup()
from conversations.models import Conversation, Message
row = Conversation.objects.filter(pk=sys.argv[1]).values("title", "updated_at").first()
replies = Message.objects.filter(conversation_id=sys.argv[1], role="assistant")
print(json.dumps({
    "row": row and {"title": row["title"], "updated_at": row["updated_at"].isoformat()},
    "replies": list(replies.values_list("status", flat=True)),
}))
"""

# Runs in the server's environment: the names of every API token.
TOKENS_SCRIPT = """
import json, django
django.setup()
from conversations.models import ApiToken
print(json.dumps(list(ApiToken.objects.values_list("name", flat=True))))
"""


@pytest.fixture(scope="module", autouse=True)
def server_settings() -> Iterator[None]:
    # Autouse, so it runs before the module's `server` copies os.environ into daphne's env.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CHAT_MODELS", json.dumps(MODELS))
        patch.setenv("CHAT_AUTO_TITLES", "1")
        patch.setenv("CHAT_TITLE_MODEL", "")  # no title model, as for the embedded engine
        patch.setenv("CHAT_CONVERSATIONS_PER_MINUTE", "1000")
        patch.setenv("CHAT_SENDS_PER_MINUTE", "1000")
        yield


@pytest.fixture
def copying(browser: Browser, alice_session: str, server: Server) -> Iterator[BrowserContext]:
    """Alice's browser, allowed to use the clipboard; a script error fails the test."""
    context = browser.new_context(
        viewport={"width": 1100, "height": 720}, storage_state=alice_session
    )
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.base)
    script_errors: list[str] = []
    context.on("weberror", lambda error: script_errors.append(str(error.error)))
    yield context
    context.close()
    assert not script_errors, script_errors


def row(server: Server, conversation: str) -> dict[str, Any]:
    return dict(server.run_script(ROW_SCRIPT, conversation))


def eventually(check: Callable[[], bool], what: str) -> None:
    """Until `check()` holds (what the server does after the page has gone is not on a page)."""
    for _ in range(100):
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"never: {what}")


def conversation_id(page: Page) -> str:
    return page.locator("section.chat").get_attribute("data-conversation") or ""


def open_menu(page: Page) -> None:
    page.locator("details.conversation-menu > summary").click()


def clipboard(page: Page) -> str:
    return str(page.evaluate("() => navigator.clipboard.readText()"))


# --- Problem 5: titles ----------------------------------------------------------------------


def test_problem_5_the_title_is_clean_first_words_with_the_embedded_default(
    server: Server, alice: BrowserContext
) -> None:
    page = home(alice, server.base)
    new_conversation(page)
    send(page, "**Plan** a `trip` to [Lisbon](https://example.com/lisbon)\n\n## Soon")
    expect(page.locator("#conversation-heading")).to_have_text("Plan a trip to Lisbon Soon")
    expect(page.locator("#messages .message.assistant").last).to_have_attribute(
        "data-status", "complete", timeout=30_000
    )
    # No title request took the engine: the follow-up starts at once, and the title stays.
    send(page, "And Porto?")
    expect(page.locator("#messages .message.assistant")).to_have_count(2)
    page.reload()
    expect(page.locator("#conversation-heading")).to_have_text("Plan a trip to Lisbon Soon")
    link = page.locator("#conversation-list [aria-current=page] a").first
    expect(link).to_contain_text("Plan a trip to Lisbon Soon")
    page.locator("#stop-button").click()


# --- Problem 6: rough edges -----------------------------------------------------------------


def test_problem_6_delete_can_be_undone(server: Server, alice: BrowserContext) -> None:
    page = home(alice, server.base)
    new_conversation(page)
    chat = conversation_id(page)
    page.evaluate("() => { window.confirmed = false; window.confirm = () => (confirmed = true); }")

    open_menu(page)
    page.get_by_role("button", name="Delete").click()
    toast = page.get_by_role("status").filter(has_text="Deleting this conversation")
    expect(toast).to_be_visible()
    toast.get_by_role("button", name="Undo").click()
    expect(toast).to_have_count(0)
    assert page.evaluate("() => window.confirmed") is False, "no confirm() dialog"
    page.reload()  # a deletion still waiting would be sent as the page goes: none is
    expect(page.locator("#conversation-heading")).to_be_visible()
    assert row(server, chat)["row"] is not None

    # Not undone: deleted when the toast's time is up, and the list is shown.
    open_menu(page)
    page.locator("form.delete").evaluate("form => { form.dataset.undoSeconds = '1'; }")
    page.get_by_role("button", name="Delete").click()
    expect(page).to_have_url(f"{server.base}/")
    assert row(server, chat)["row"] is None


def test_problem_6_a_deletion_not_undone_happens_when_the_page_is_left(
    server: Server, alice: BrowserContext
) -> None:
    page = home(alice, server.base)
    new_conversation(page)
    chat = conversation_id(page)
    open_menu(page)
    page.get_by_role("button", name="Delete").click()
    expect(page.get_by_role("button", name="Undo")).to_be_visible()
    page.goto(f"{server.base}/")
    eventually(lambda: row(server, chat)["row"] is None, "the conversation was deleted")


def test_problem_6_reloading_after_creating_a_token_creates_no_second_one(
    server: Server, copying: BrowserContext
) -> None:
    page = copying.new_page()
    page.goto(f"{server.base}/settings/tokens/")
    page.locator("#token-name").fill("nightly backup")
    page.get_by_role("button", name="Create token").click()
    key = page.locator("#new-token-key")
    expect(key).to_have_value(re.compile(r"^cs_"))
    expect(page).to_have_url(f"{server.base}/settings/tokens/")  # redirected to a GET

    page.get_by_role("button", name="Copy the token").click()
    expect(page.locator("#copy-status")).to_have_text("Copied to the clipboard.")
    assert clipboard(page) == key.input_value()

    page.reload()
    expect(page.locator("#new-token-key")).to_have_count(0)  # shown once only
    expect(page.locator("#api-token-list tr", has_text="nightly backup")).to_have_count(1)
    assert server.run_script(TOKENS_SCRIPT).count("nightly backup") == 1


def test_problem_6_the_share_link_has_a_copy_button(
    server: Server, copying: BrowserContext
) -> None:
    page = copying.new_page()
    page.goto(f"{server.base}/")
    new_conversation(page)
    open_menu(page)
    page.get_by_role("link", name="Share a read-only link…").click()
    page.get_by_role("button", name="Create share link").click()
    link = page.locator("#new-share-url")
    expect(link).to_have_value(re.compile(r"^http://127\.0\.0\.1:\d+/"))
    page.get_by_role("button", name="Copy the link").click()
    expect(page.locator("#copy-status")).to_have_text("Copied to the clipboard.")
    assert clipboard(page) == link.input_value()


def test_problem_6_a_search_hit_opens_without_scrolling_the_document(
    server: Server, alice: BrowserContext
) -> None:
    seeded = server.run_script(SEED_SCRIPT, "Spice island notes")
    page = home(alice, server.base)
    page.locator("#search-box").fill("zanzibar")
    hit = page.locator(".search-hit a", has_text="Spice island notes")
    hit.click()
    target = page.locator(f"#msg-{seeded['first']}")
    expect(page).to_have_url(re.compile(f"#msg-{seeded['first']}$"))
    expect(target).to_be_in_viewport()
    # Nothing but the message list scrolled: the top bar is where it was, no band below.
    scrolled = page.evaluate(
        """() => {
            const list = document.getElementById("messages");
            const moved = [];
            for (let e = list.parentElement; e; e = e.parentElement) if (e.scrollTop) moved.push(e.tagName);
            return moved;
        }"""
    )
    assert scrolled == []
    assert page.locator("header.topbar").bounding_box()["y"] == 0  # type: ignore[index]
    assert page.evaluate("() => document.getElementById('messages').scrollTop") > 0


def test_problem_6_snippets_are_plain_text_cut_at_words(
    server: Server, alice: BrowserContext
) -> None:
    server.run_script(SEED_SCRIPT, "Island trade notes")
    page = home(alice, server.base)
    page.locator("#search-box").fill("zanzibar")
    snippet = page.locator(".search-hit .hit-snippet").first
    expect(snippet).to_contain_text("Zanzibar is an island of the spice trade, with beaches")
    text = (snippet.text_content() or "").strip()
    assert not re.search(r"\*\*|`|\]\(|https?://", text), text
    # Cut after a whole word (with an ellipsis where Python cuts it; PostgreSQL's ts_headline
    # cuts at words without one).
    seen = "Zanzibar is an island of the spice trade, with beaches "
    words = set((seen + "and a very long history of trading dhows across the ocean").split())
    assert text.removesuffix("…").split()[-1] in words, text


def test_problem_6_renaming_keeps_the_conversations_date(
    server: Server, alice: BrowserContext
) -> None:
    seeded = server.run_script(SEED_SCRIPT, "Old travel notes")
    before = row(server, seeded["id"])["row"]
    page = alice.new_page()
    page.goto(server.base + seeded["url"])
    open_menu(page)
    page.locator("form.rename input[name=title]").fill("Zanzibar, renamed")
    page.get_by_role("button", name="Rename").click()
    expect(page.locator("#conversation-heading")).to_have_text("Zanzibar, renamed")
    assert row(server, seeded["id"])["row"] == {**before, "title": "Zanzibar, renamed"}
    group = page.evaluate(
        """() => {
            let item = document.querySelector("#conversation-list li[aria-current=page]");
            while (item && !item.classList.contains("date-group")) item = item.previousElementSibling;
            return item ? item.textContent.trim() : "";
        }"""
    )
    assert group not in {"Today", ""}, group


def test_problem_6_a_failed_retry_replaces_its_own_failed_version(
    server: Server, alice: BrowserContext
) -> None:
    page = home(alice, server.base)
    new_conversation(page)
    chat = conversation_id(page)
    page.locator("#send-form select.model-picker").select_option("failing")
    send(page, "Hello")
    replies = page.locator("#messages .message.assistant")
    expect(replies.last).to_have_attribute("data-status", "error")
    for _ in range(2):
        failed = replies.last.get_attribute("id") or ""
        replies.last.get_by_role("button", name="Retry").click()
        expect(replies.last).not_to_have_id(failed)
        expect(replies.last).to_have_attribute("data-status", "error")
    expect(replies).to_have_count(1)
    expect(page.locator("#messages .versions")).to_have_count(0)  # no "1/3"
    assert row(server, chat)["replies"] == ["error"]


def test_problem_6_a_long_question_is_folded_with_show_more(
    server: Server, alice: BrowserContext
) -> None:
    page = home(alice, server.base)
    new_conversation(page)
    question = ("How do I plan a long trip across the islands? " * 200)[:LONG_QUESTION_CHARS]
    send(page, question)
    text = page.locator("#messages .message.user .user-text")
    more = page.locator("#messages .message.user").get_by_role("button", name="Show more")
    expect(more).to_have_attribute("aria-expanded", "false")
    folded = text.bounding_box()["height"]  # type: ignore[index]
    assert folded < 400, folded

    more.click()
    less = page.locator("#messages .message.user").get_by_role("button", name="Show less")
    expect(less).to_have_attribute("aria-expanded", "true")
    assert text.bounding_box()["height"] > 3 * folded  # type: ignore[index]
    assert (text.text_content() or "") == question
    page.locator("#stop-button").click()


def test_problem_6_jump_to_latest_while_scrolled_up_during_a_stream(
    server: Server, alice: BrowserContext
) -> None:
    seeded = server.run_script(SEED_SCRIPT, "A long read")
    page = alice.new_page()
    page.goto(server.base + seeded["url"])
    expect(page.locator("section.chat[data-socket=open]")).to_be_visible()
    jump = page.get_by_role("button", name="Jump to latest")
    send(page, "Tell me more")
    expect(page.locator("#stop-button")).to_be_enabled()
    expect(jump).to_be_hidden()  # following the reply at the bottom

    page.locator("#messages").evaluate("list => { list.scrollTop = 0; }")
    expect(jump).to_be_visible()
    jump.click()
    expect(jump).to_be_hidden()
    at_bottom = "l => l.scrollHeight - l.scrollTop - l.clientHeight < 48"
    assert page.locator("#messages").evaluate(at_bottom)
    expect(page.locator("#send-form textarea")).to_be_focused()
    page.locator("#stop-button").click()


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_problem_6_the_new_controls_pass_axe(
    server: Server,
    browser: Browser,
    alice_session: str,
    scheme: str,
    viewport: dict[str, int],
) -> None:
    """The folded message and its Show more, Jump to latest and the Undo toast, in both themes
    and on both screens: axe-core finds nothing serious or critical."""
    context = browser.new_context(
        viewport=viewport,  # type: ignore[arg-type]
        color_scheme=scheme,  # type: ignore[arg-type]
        storage_state=alice_session,
    )
    try:
        page = context.new_page()
        seeded = server.run_script(SEED_SCRIPT, "Checked by axe")
        page.goto(server.base + seeded["url"])
        expect(page.locator("section.chat[data-socket=open]")).to_be_visible()
        send(page, "A long question? " * 400)
        expect(page.get_by_role("button", name="Show more")).to_be_visible()
        page.locator("#messages").evaluate("list => { list.scrollTop = 0; }")
        expect(page.get_by_role("button", name="Jump to latest")).to_be_visible()
        assert serious_violations(page) == []
        page.locator("#stop-button").click()
        open_menu(page)
        page.get_by_role("button", name="Delete").click()
        expect(page.get_by_role("button", name="Undo")).to_be_visible()
        assert serious_violations(page) == []
        page.get_by_role("button", name="Undo").click()
    finally:
        context.close()

"""The chat page for every hand and screen, in Chromium: Copy, per-message details, the keyboard,
the over-long message and drafts, the phone layout, the theme, and axe-core's audit.

The server, its database, the browser and alice's login are test_browser.py's fixtures, imported
here (the scripted engine writes 400 tokens 30 ms apart, so a reply runs long enough to stop).
Desktop is 1440x900 and the phone 390x844; light and dark are the browser's color scheme with the
"system" theme, and the user's own choice where the theme is the subject.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Locator, Page, expect

from tests.pages import test_browser
from tests.pages.test_browser import Server, latest_reply_id, new_conversation, wait_for_growth
from tests.support.servers import ROOT

pytestmark = pytest.mark.browser

server = test_browser.server
browser = test_browser.browser
alice_session = test_browser.alice_session

DESKTOP = {"width": 1440, "height": 900}
PHONE = {"width": 390, "height": 844}
AXE = Path(__file__).resolve().parents[1] / "support" / "vendor" / "axe.min.js"
MAX_PROMPT_CHARS = 8000  # the server's default CHAT_MAX_PROMPT_CHARS

CODE = 'print("<b>hi</b>")\n'
REPLY = f"Here is **some** code:\n\n```python\n{CODE}```\n\n<script>alert(1)</script> and done."
LONG_TITLE = "Planning the summer trip to the Dolomites with the whole family"

# Runs in the server's environment: a conversation of alice's with a finished reply whose timings
# are known (first token after 250 ms, 120 tokens in 3 s).
SEED_SCRIPT = """
import json, sys, django
from datetime import timedelta
django.setup()
from django.contrib.auth import get_user_model
from django.utils import timezone
from conversations.models import Conversation, Message
alice = get_user_model().objects.get(username="alice")
conversation = Conversation.objects.create(owner=alice, title=sys.argv[1])
question = Message.objects.create(conversation=conversation, role="user", content="Show me code")
reply = Message.objects.create(
    conversation=conversation, role="assistant", content=sys.argv[2], status="complete",
    engine="scripted", model="scripted-1", model_slug="scripted", completion_tokens=120,
)
start = timezone.now() - timedelta(minutes=5)
Message.objects.filter(pk=question.pk).update(created_at=start - timedelta(seconds=1))
Message.objects.filter(pk=reply.pk).update(
    created_at=start, engine_ready_at=start, first_token_at=start + timedelta(milliseconds=250),
    finished_at=start + timedelta(milliseconds=3250),
)
print(json.dumps({"url": conversation.get_absolute_url(), "reply": f"msg-{reply.pk}"}))
"""


@pytest.fixture(scope="module", autouse=True)
def generous_rates() -> Iterator[None]:
    # Autouse, so it runs before the module's `server` copies os.environ into daphne's env. These
    # tests start conversations and send faster than a person; the rates have tests of their own.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CHAT_CONVERSATIONS_PER_MINUTE", "1000")
        patch.setenv("CHAT_SENDS_PER_MINUTE", "1000")
        yield


@dataclass
class Seeded:
    url: str
    reply: str


def seed(server: Server, title: str = LONG_TITLE, reply: str = REPLY) -> Seeded:
    result = subprocess.run(
        [sys.executable, "-c", SEED_SCRIPT, title, reply],
        cwd=ROOT,
        env=server.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout.strip().splitlines()[-1])
    return Seeded(url=server.base + data["url"], reply=data["reply"])


@pytest.fixture
def open_page(
    browser: Browser, alice_session: str, server: Server
) -> Iterator[Callable[..., Page]]:
    """A page of alice's at a viewport and color scheme; clipboard allowed; script errors fail."""
    contexts: list[BrowserContext] = []
    script_errors: list[str] = []

    def _open(viewport: dict[str, int] = DESKTOP, scheme: str = "light") -> Page:
        context = browser.new_context(
            viewport=viewport,  # type: ignore[arg-type]
            color_scheme=scheme,  # type: ignore[arg-type]
            storage_state=alice_session,
        )
        context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.base)
        context.on("weberror", lambda error: script_errors.append(str(error.error)))
        contexts.append(context)
        return context.new_page()

    yield _open
    for context in contexts:
        context.close()
    assert not script_errors, script_errors


def tab_to(page: Page, target: Locator, limit: int = 40) -> None:
    """Press Tab until `target` has the focus: it is reachable by keyboard."""
    for _ in range(limit):
        if target.evaluate("element => element === document.activeElement"):
            return
        page.keyboard.press("Tab")
    raise AssertionError(f"Tab never reached {target}")


def clipboard(page: Page) -> str:
    return str(page.evaluate("() => navigator.clipboard.readText()"))


def serious_violations(page: Page) -> list[dict[str, Any]]:
    """axe-core's serious and critical findings on the page as it is now."""
    if not page.evaluate("() => typeof window.axe === 'object'"):
        page.evaluate(AXE.read_text())  # evaluated by the driver, so the page's CSP allows it
    found = page.evaluate(
        """async () => (await axe.run(document, {resultTypes: ["violations"]})).violations
            .filter(v => v.impact === "serious" || v.impact === "critical")
            .map(v => ({id: v.id, impact: v.impact, help: v.help,
                        nodes: v.nodes.map(n => n.target.join(" ") + ": " + n.failureSummary)}))"""
    )
    return list(found)


def test_it_copies_a_reply_as_markdown_and_a_code_block_by_keyboard(
    server: Server, open_page: Callable[..., Page]
) -> None:
    seeded = seed(server)
    page = open_page(DESKTOP)
    page.goto(seeded.url)
    reply = page.locator(f"#{seeded.reply}")
    # The reply's <script> is text, never markup; the code block got its toolbar after the render.
    expect(reply.locator(".body")).to_contain_text("<script>alert(1)</script> and done.")
    assert reply.locator("script").count() == 0
    expect(reply.locator(".code-toolbar")).to_contain_text("python")

    page.locator(".chat-header summary").focus()
    # Located by class: the accessible name changes with the confirmation.
    copy_code = reply.locator(".code-block button.copy")
    expect(copy_code).to_have_accessible_name("Copy the code")
    tab_to(page, copy_code)
    page.keyboard.press("Enter")
    expect(copy_code).to_contain_text("Copied")
    assert clipboard(page) == CODE
    expect(page.locator("#copy-status")).to_have_text("Copied to the clipboard.")

    copy_reply = reply.locator("footer button.copy")
    expect(copy_reply).to_have_accessible_name("Copy the reply as Markdown")
    tab_to(page, copy_reply)
    page.keyboard.press("Space")
    expect(copy_reply).to_contain_text("Copied")
    assert clipboard(page) == REPLY
    expect(copy_reply).to_be_focused()
    # The confirmation goes away by itself.
    expect(copy_reply).to_have_accessible_name("Copy the reply as Markdown", timeout=5000)


def test_it_shows_a_reply_s_details_on_hover_and_on_focus(
    server: Server, open_page: Callable[..., Page]
) -> None:
    seeded = seed(server)
    page = open_page(DESKTOP, "dark")
    page.goto(seeded.url)
    reply = page.locator(f"#{seeded.reply}")
    details = reply.locator(".detail")
    expect(details).to_have_text(
        ["Model scripted-1", "First token after 250 ms", "40.0 tokens/s", "120 tokens"]
    )
    expect(reply.locator("time")).to_be_visible()  # the time shows always
    for detail in details.all():
        expect(detail).to_have_css("opacity", "0")

    reply.hover()
    for detail in details.all():
        expect(detail).to_have_css("opacity", "1")

    page.mouse.move(5, 895)
    expect(details.first).to_have_css("opacity", "0")
    page.locator(".chat-header summary").focus()
    tab_to(page, reply.get_by_role("button", name="Copy the reply as Markdown"))
    for detail in details.all():
        expect(detail).to_have_css("opacity", "1")


def test_escape_stops_the_reply_and_the_focus_returns_to_the_message_box(
    server: Server, open_page: Callable[..., Page]
) -> None:
    page = open_page(DESKTOP)
    page.goto(server.base + "/")
    new_conversation(page)
    box = page.locator("#message-box")

    # Send with Enter; the box keeps the focus. Escape from elsewhere on the page stops the reply.
    box.fill("Count for me")
    box.press("Enter")
    expect(box).to_be_focused()
    first = latest_reply_id(page)
    wait_for_growth(page, first, 0)
    page.locator("#conversation-list a").first.focus()
    page.keyboard.press("Escape")
    expect(page.locator(f"#{first}")).to_have_attribute("data-status", "cancelled")
    expect(box).to_be_focused()
    stopped_by = page.locator(f"#{first} .stopped-by")
    expect(stopped_by).to_have_text(re.compile(r"^Stopped by alice after \d+ tokens?$"))

    # Send with the mouse, stop with the keyboard on the Stop button: the focus comes back.
    box.fill("And again")
    page.get_by_role("button", name="Send").click()
    expect(box).to_be_focused()
    expect(page.locator("#messages .message.user")).to_have_count(2)
    second = latest_reply_id(page)
    assert second != first
    wait_for_growth(page, second, 0)
    stop = page.get_by_role("button", name="Stop")
    tab_to(page, stop)
    page.keyboard.press("Enter")
    expect(page.locator(f"#{second}")).to_have_attribute("data-status", "cancelled")
    expect(box).to_be_focused()

    # The details were the saved row's: a reload shows the same.
    text = stopped_by.text_content()
    page.reload()
    expect(page.locator(f"#{first} .stopped-by")).to_have_text(text or "")


def test_it_refuses_an_over_long_message_with_its_count_and_keeps_each_draft(
    server: Server, open_page: Callable[..., Page]
) -> None:
    page = open_page(DESKTOP)
    page.goto(server.base + "/")
    box = page.locator("#message-box")
    # Another conversation, used (an unused one is offered again by New conversation).
    other = new_conversation(page)
    box.fill("an earlier chat")
    box.press("Enter")
    expect(page.locator("#messages .message.user")).to_have_count(1)
    page.keyboard.press("Escape")
    expect(page.get_by_role("button", name="Stop")).to_be_disabled()
    url = new_conversation(page)
    assert url != other
    # A new conversation says which model answers and offers prompts that fill the box.
    expect(page.locator(".empty-chat .model-answering")).not_to_be_empty()
    example = page.locator(".example-prompt").first
    example.click()
    expect(box).to_have_value(example.text_content() or "")
    expect(box).to_be_focused()

    long = "word " * 1900  # 9,499 characters once trimmed: 1,499 over the limit
    box.fill(long)
    expect(page.locator("#composer-count")).to_have_text("9,499 / 8,000 characters")
    box.press("Enter")
    refusal = page.locator("#composer-limit")
    expect(refusal).to_be_visible()
    expect(refusal).to_contain_text("9,499 characters, over the limit of 8,000")
    expect(refusal).to_contain_text("Shorten it by 1,499 characters")
    page.get_by_role("button", name="Send").click()
    assert box.input_value() == long, "the draft was cut or lost"
    expect(box).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#messages .message")).to_have_count(0)
    conversation_id = url.rstrip("/").rsplit("/", 1)[-1]
    assert server.stored_messages(conversation_id) == []

    # The draft survives a reload and a visit to another conversation with its own draft.
    page.reload()
    expect(box).to_have_value(long)
    page.goto(other)
    expect(box).to_have_value("")
    box.fill("the other draft")
    page.goto(url)
    expect(box).to_have_value(long)

    # Shortened, it is sent, and its draft is gone; the other conversation's is not.
    box.fill(long[: MAX_PROMPT_CHARS - 10])
    expect(refusal).to_be_hidden()
    box.press("Enter")
    expect(page.locator("#messages .message.user")).to_have_count(1)
    page.keyboard.press("Escape")
    expect(page.get_by_role("button", name="Stop")).to_be_disabled()
    page.reload()
    expect(page.locator("#messages .message.user")).to_have_count(1)
    expect(box).to_have_value("")
    page.goto(other)
    expect(box).to_have_value("the other draft")


def test_the_shortcuts_are_listed_in_a_dialog_and_work(
    server: Server, open_page: Callable[..., Page]
) -> None:
    seed(server, title="Shortcuts conversation")
    page = open_page(DESKTOP)
    page.goto(server.base + "/")
    page.keyboard.press("?")
    dialog = page.get_by_role("dialog", name="Keyboard shortcuts")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("Stop the reply being written")
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()

    page.keyboard.press("Alt+Shift+K")
    expect(page.locator("#conversation-list a").first).to_be_focused()
    before = page.url
    page.keyboard.press("Alt+Shift+N")
    expect(page).not_to_have_url(before)
    expect(page.locator("section.chat[data-socket=open]")).to_be_visible()
    expect(page.get_by_role("heading", level=1)).to_have_text("New conversation")
    page.locator("#conversation-list a").first.focus()
    page.keyboard.press("/")
    expect(page.locator("#message-box")).to_be_focused()


def test_the_phone_layout_has_a_menu_a_readable_title_and_stop_in_place_of_send(
    server: Server, open_page: Callable[..., Page]
) -> None:
    seeded = seed(server)
    page = open_page(PHONE, "dark")
    page.goto(seeded.url)
    sidebar = page.locator("#sidebar")
    menu = page.get_by_role("button", name="Conversations")
    expect(sidebar).to_be_hidden()
    expect(menu).to_have_attribute("aria-expanded", "false")

    # The title keeps most of the width; Rename and Delete wait in a menu.
    heading = page.get_by_role("heading", level=1)
    expect(heading).to_have_text(LONG_TITLE)
    box = heading.bounding_box()
    assert box is not None and box["width"] > 250, box
    rename = page.get_by_role("button", name="Rename")
    expect(rename).to_be_hidden()
    page.locator(".conversation-menu summary").click()
    expect(rename).to_be_visible()
    expect(page.get_by_role("button", name="Delete")).to_be_visible()
    panel = page.locator(".menu-panel").bounding_box()
    assert panel is not None and panel["x"] >= 0 and panel["x"] + panel["width"] <= 390, panel
    page.keyboard.press("Escape")
    expect(rename).to_be_hidden()

    # The menu opens the list of conversations over the page, and Escape closes it.
    menu.click()
    expect(sidebar).to_be_visible()
    expect(menu).to_have_attribute("aria-expanded", "true")
    expect(sidebar.get_by_role("link", name=LONG_TITLE).first).to_be_visible()
    expect(sidebar.get_by_role("button", name="New conversation")).to_be_visible()
    page.keyboard.press("Escape")
    expect(sidebar).to_be_hidden()
    expect(menu).to_be_focused()

    # The composer spans the screen; while a reply runs, Stop stands where Send was.
    form = page.locator("#send-form").bounding_box()
    assert form is not None and form["width"] >= 360, form
    send = page.get_by_role("button", name="Send")
    stop = page.get_by_role("button", name="Stop")
    expect(send).to_be_visible()
    expect(stop).to_be_hidden()
    page.locator("#message-box").fill("A short question")
    send.click()
    expect(stop).to_be_visible()
    expect(send).to_be_hidden()
    stop.click()
    expect(send).to_be_visible()
    expect(stop).to_be_hidden()
    expect(page.locator("#message-box")).to_be_focused()


def test_the_chosen_theme_is_remembered_and_rendered_before_any_script(
    server: Server, open_page: Callable[..., Page]
) -> None:
    page = open_page(DESKTOP, "light")
    page.goto(server.base + "/")
    html = page.locator("html")
    expect(html).to_have_attribute("data-theme", "system")
    light = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
    theme = page.get_by_label("Theme")
    try:
        with page.expect_response(lambda response: response.url.endswith("/settings/theme/")):
            theme.select_option("dark")
        expect(html).to_have_attribute("data-theme", "dark")
        dark = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
        assert dark != light and dark == "rgb(21, 24, 29)", (light, dark)
        # The next page comes with it from the server: no flash of the light theme.
        response = page.request.get(server.base + "/")
        assert '<html lang="en" data-theme="dark">' in response.text()
        page.reload()
        expect(html).to_have_attribute("data-theme", "dark")
        expect(theme).to_have_value("dark")
    finally:
        with page.expect_response(lambda response: response.url.endswith("/settings/theme/")):
            theme.select_option("system")
    page.reload()
    expect(html).to_have_attribute("data-theme", "system")


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_axe_finds_no_serious_violations(
    server: Server, open_page: Callable[..., Page], scheme: str, viewport: dict[str, int]
) -> None:
    seeded = seed(server)
    page = open_page(viewport, scheme)

    page.goto(server.base + "/")
    assert serious_violations(page) == []

    # A conversation with a rendered reply, its details shown, and a new one's empty state.
    page.goto(seeded.url)
    page.locator(f"#{seeded.reply}").hover()
    expect(page.locator(f"#{seeded.reply} .detail").first).to_have_css("opacity", "1")
    assert serious_violations(page) == []
    if viewport == PHONE:  # the list is in the drawer, and so is its New conversation button
        page.get_by_role("button", name="Conversations").click()
        expect(page.locator("#sidebar")).to_be_visible()
        assert serious_violations(page) == []
    new_conversation(page)
    expect(page.locator(".empty-chat")).to_be_visible()
    assert serious_violations(page) == []


# Runs in the server's environment: a conversation of alice's whose reply is rendered to over
# daphne's 1 MiB (each `"` is six bytes once escaped, and the page holds the reply twice).
LONG_REPLY_SCRIPT = """
import json, django
django.setup()
from django.contrib.auth import get_user_model
from conversations.models import Conversation, Message
alice = get_user_model().objects.get(username="alice")
conversation = Conversation.objects.create(owner=alice, title="A long reply")
question = Message.objects.create(conversation=conversation, role="user", content="Quote it all")
reply = Message.objects.create(
    conversation=conversation, role="assistant", content='"quoted" ' * 40000 + "The end.",
    status="complete", parent=question,
)
Conversation.objects.filter(pk=conversation.pk).update(current_leaf=reply)
print(json.dumps({"url": conversation.get_absolute_url(), "reply": f"msg-{reply.pk}"}))
"""


def test_finding_5_a_reply_too_long_for_a_frame_is_loaded_and_the_chat_goes_on(
    server: Server, open_page: Callable[..., Page]
) -> None:
    """The socket's first frame, the saved reply, would be over daphne's limit: it comes as a
    placeholder that loads the reply over HTTP, and the socket stays open for the next send."""
    seeded = server.run_script(LONG_REPLY_SCRIPT)
    page = open_page(DESKTOP)
    with page.expect_response(re.compile(r"/messages/\d+/$")) as loaded:
        page.goto(server.base + seeded["url"])
    assert loaded.value.status == 200
    reply = page.locator(f"#{seeded['reply']}")
    expect(reply).to_have_attribute("data-status", "complete")
    expect(page.locator("article.loading")).to_have_count(0)
    assert reply.locator(".body").evaluate("body => body.textContent.trim()").endswith("The end.")
    box = page.locator("#message-box")
    box.fill("Thanks")
    box.press("Enter")
    expect(page.locator("#messages .message.user")).to_have_count(2)
    wait_for_growth(page, latest_reply_id(page), 0)
    page.get_by_role("button", name="Stop").click()
    expect(page.locator(f"#{latest_reply_id(page)}")).to_have_attribute("data-status", "cancelled")
    expect(page.locator("#connection-status")).to_be_hidden()

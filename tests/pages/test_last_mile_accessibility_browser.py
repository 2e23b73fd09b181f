"""Issue 30, problem 7 in Chromium: every page type, light and dark, desktop and phone, through
axe-core (nothing serious or critical) and the checks Lighthouse's Best Practices and
Accessibility audits make that axe does not: no console errors, no missing resource, a favicon,
targets of 24 by 24 CSS pixels (WCAG 2.5.8), a 16 px composer on phones, the page's language,
a viewport, images with alt text.

The server, its database, the browser and alice's login are test_browser.py's fixtures.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, Response, expect

from tests.pages import test_browser
from tests.pages.test_browser import Server
from tests.pages.test_page_ux_browser import DESKTOP, PHONE, serious_violations

pytestmark = pytest.mark.browser

server = test_browser.server
browser = test_browser.browser
alice_session = test_browser.alice_session

WIDE_CODE = "x = [" + ", ".join(str(n) for n in range(60)) + "]  # wider than any reply\n"
REPLY = (
    "A wide block of code:\n\n```python\n" + WIDE_CODE + "```\n\n"
    "| Engine | Tokens/s | Notes |\n|:--|--:|:--|\n| vLLM | 95.5 | fast |\n"
    "| llama.cpp | 31 | small |\n\n- [x] measured\n- [ ] compared\n\n"
    "See https://example.com/docs and ~~this~~ **that**.\n"
)

# Runs in the server's environment: one of each thing alice's pages show.
SEED_SCRIPT = """
import json, sys, django
django.setup()
from django.contrib.auth import get_user_model
from conversations.models import Conversation, Message
from conversations.services.projects import project_create
from conversations.services.saved_prompts import prompt_create
from conversations.services.shares import share_create
from conversations.services.tokens import api_token_create
from django.contrib.auth.models import Permission
alice = get_user_model().objects.get(username="alice")
alice.user_permissions.add(Permission.objects.get(codename="view_tokenusage"))  # the usage page
project = project_create(owner=alice, name="Benchmarks")
conversation = Conversation.objects.create(owner=alice, title="Engine speeds", project=project)
question = Message.objects.create(
    conversation=conversation, role="user", content="Compare the engines"
)
reply = Message.objects.create(
    conversation=conversation, role="assistant", content=sys.argv[1], status="complete",
    parent=question, engine="scripted", model="scripted-1", model_slug="scripted",
)
Conversation.objects.filter(pk=conversation.pk).update(current_leaf=reply)
conversation.refresh_from_db()
_, share_token = share_create(conversation=conversation, created_by=alice)
prompt_create(owner=alice, title="Summarise", text="Summarise {{text}} in three lines")
api_token_create(user=alice, name="Laptop")
print(json.dumps({
    "conversation": conversation.get_absolute_url(),
    "project": f"/projects/{project.pk}/",
    "share": f"/s/{share_token}/",
}))
"""


@dataclass
class Seeded:
    conversation: str
    project: str
    share: str


@pytest.fixture(scope="module")
def seeded(server: Server) -> Seeded:
    return Seeded(**server.run_script(SEED_SCRIPT, REPLY))


# A conversation's socket sends its saved state once it connects, and the page swaps the reply
# for it: a test that focuses or measures the reply waits for that first.
SETTLED_FLAG = (
    "document.addEventListener('htmx:wsAfterMessage', () => { window.socketSettled = true; });"
)


def settled(page: Page) -> None:
    page.wait_for_function("() => window.socketSettled === true")


@dataclass
class Watched:
    """What went wrong while a page was open: script errors, console errors, failed requests."""

    problems: list[str] = field(default_factory=list)


@pytest.fixture
def open_page(
    browser: Browser, alice_session: str
) -> Iterator[Callable[..., tuple[Page, Watched]]]:
    contexts: list[BrowserContext] = []

    def _open(
        viewport: dict[str, int], scheme: str, signed_in: bool = True
    ) -> tuple[Page, Watched]:
        context = browser.new_context(
            viewport=viewport,  # type: ignore[arg-type]
            color_scheme=scheme,  # type: ignore[arg-type]
            storage_state=alice_session if signed_in else None,
        )
        context.add_init_script(SETTLED_FLAG)
        contexts.append(context)
        watched = Watched()
        page = context.new_page()
        page.on("pageerror", lambda error: watched.problems.append(f"script: {error}"))
        page.on(
            "console",
            lambda message: (
                message.type == "error"
                and watched.problems.append(f"console: {message.text} at {page.url}")
            ),
        )

        def failed(response: Response) -> None:
            if response.status >= 400:
                watched.problems.append(f"{response.status} {response.url}")

        page.on("response", failed)
        return page, watched

    yield _open
    for context in contexts:
        context.close()


# Alice's page types, each with what shows it loaded; the conversation's extras are checked too.
# (The import form is the Settings page's, at /settings/tokens/; /settings/import/ takes its POST.)
PAGES = {
    "chat list": ("/", "#conversation-list"),
    "account": ("/account/", "main h1"),
    "tokens": ("/settings/tokens/", "main h1"),
    "prompts": ("/settings/prompts/", "main h1"),
    "usage": ("/usage/", "main h1"),
    "archive": ("/archive/", "main h1"),
}


def visits(seeded: Seeded) -> dict[str, tuple[str, str]]:
    return {
        **PAGES,
        "conversation": (seeded.conversation, "#messages .message.assistant .code-block"),
        "shares": (seeded.conversation + "shares/", "main h1"),
        "project": (seeded.project, "main h1"),
        "shared page": (seeded.share, "main .markdown pre"),
    }


def open_each(page: Page, server: Server, seeded: Seeded) -> Iterator[str]:
    """Each page type in turn (its name yielded once it is loaded), then the conversation with
    its settings open and search hits in the sidebar."""
    for name, (url, loaded) in visits(seeded).items():
        page.goto(server.base + url)
        expect(page.locator(loaded).first).to_be_visible()
        if url == seeded.conversation:
            settled(page)
        yield name
    page.goto(server.base + seeded.conversation)
    settled(page)
    expect(page.locator("#messages .code-block").first).to_be_visible()
    settings = page.locator("details.chat-settings")
    if settings.count():
        settings.locator("summary").click()
        yield "conversation settings"
    menu = page.locator("details.conversation-menu > summary")
    menu.click()
    expect(page.locator(".conversation-menu .menu-panel")).to_be_visible()
    yield "conversation menu"
    menu.click()
    if page.locator(".menu-button").is_visible():  # the phone keeps the sidebar in a drawer
        page.locator(".menu-button").click()
    page.locator(".search-form input").fill("engines")
    expect(page.locator("#search-results mark").first).to_be_visible()
    yield "search hits"


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_problem_7_axe_finds_nothing_serious_on_any_page(
    server: Server,
    seeded: Seeded,
    open_page: Callable[..., tuple[Page, Watched]],
    scheme: str,
    viewport: dict[str, int],
) -> None:
    page, watched = open_page(viewport, scheme)
    found = {name: serious_violations(page) for name in open_each(page, server, seeded)}
    login, signed_out = open_page(viewport, scheme, signed_in=False)
    login.goto(server.base + "/accounts/login/")
    found["login"] = serious_violations(login)
    assert {name: v for name, v in found.items() if v} == {}
    assert watched.problems == signed_out.problems == []


# Lighthouse's checks that axe leaves out, as far as a page can tell them itself. Targets: every
# control, and every link but one in a line of text (2.5.8's inline exception); one smaller
# than 24x24 passes if a 24 px circle on its centre touches no other target (the spacing one).
PAGE_CHECKS = """() => {
  const problems = [];
  const html = document.documentElement;
  if (!html.lang) problems.push("no lang on <html>");
  const viewport = document.querySelector('meta[name="viewport"]');
  if (!viewport || !/width=device-width/.test(viewport.content)) problems.push("no viewport meta");
  if (!document.querySelector('link[rel~="icon"]')) problems.push("no icon link");
  document.querySelectorAll("img:not([alt])").forEach(img => problems.push("img without alt: " + img.src));
  const visible = e => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0 &&
    e.checkVisibility({contentVisibilityAuto: true, visibilityProperty: true}); };
  const inText = e => e.tagName === "A" && getComputedStyle(e).display === "inline" &&
    e.parentElement.textContent.trim().length > e.textContent.trim().length;
  const targets = [...document.querySelectorAll(
    "a[href], button, select, summary, textarea, input:not([type=hidden]), [role=button], [role=option]"
  )].filter(e => visible(e) && !e.disabled && !inText(e) && !e.closest("[inert], .visually-hidden"));
  const boxes = targets.map(e => e.getBoundingClientRect());
  const name = e => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") +
    (e.className && typeof e.className === "string" ? "." + e.className.trim().split(/\\s+/).join(".") : "") +
    " " + JSON.stringify((e.textContent || e.value || e.getAttribute("aria-label") || "").trim().slice(0, 30));
  const distance = (x, y, r) => Math.hypot(Math.max(r.left - x, 0, x - r.right), Math.max(r.top - y, 0, y - r.bottom));
  targets.forEach((e, i) => {
    const r = boxes[i];
    if (r.width >= 23.5 && r.height >= 23.5) return;
    const x = r.left + r.width / 2, y = r.top + r.height / 2;
    const crowded = boxes.some((other, j) => j !== i && !targets[j].contains(e) && !e.contains(targets[j]) &&
      distance(x, y, other) < 12);
    if (crowded) problems.push(`target ${Math.round(r.width)}x${Math.round(r.height)}: ${name(e)}`);
  });
  if (targets.length < 3) problems.push(`only ${targets.length} targets found`);
  return problems;
}"""


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_problem_7_every_page_passes_the_lighthouse_checks(
    server: Server,
    seeded: Seeded,
    open_page: Callable[..., tuple[Page, Watched]],
    viewport: dict[str, int],
) -> None:
    page, watched = open_page(viewport, "light")
    found = {name: page.evaluate(PAGE_CHECKS) for name in open_each(page, server, seeded)}
    login, signed_out = open_page(viewport, "light", signed_in=False)
    login.goto(server.base + "/accounts/login/")
    found["login"] = login.evaluate(PAGE_CHECKS)
    assert {name: problems for name, problems in found.items() if problems} == {}
    assert watched.problems == signed_out.problems == []


def test_problem_7_the_favicon_is_served(server: Server, browser: Browser) -> None:
    context = browser.new_context()
    try:
        response = context.request.get(server.base + "/favicon.ico")
        assert response.ok and response.headers["content-type"].startswith("image/svg+xml")
        assert response.url.endswith("/static/chatsite/favicon.svg")
    finally:
        context.close()


def test_problem_7_the_composer_font_is_16px_on_phones(
    server: Server, seeded: Seeded, open_page: Callable[..., tuple[Page, Watched]]
) -> None:
    page, _ = open_page(PHONE, "light")
    page.goto(server.base + seeded.conversation)
    composer = page.locator("#send-form textarea")
    expect(composer).to_have_css("font-size", "16px")
    for field_ in page.locator("input:visible, select:visible, textarea:visible").all():
        size = float(field_.evaluate("e => parseFloat(getComputedStyle(e).fontSize)"))
        assert size >= 16, field_.evaluate("e => e.outerHTML.slice(0, 120)")


def test_problem_7_wide_code_blocks_scroll_from_the_keyboard(
    server: Server, seeded: Seeded, open_page: Callable[..., tuple[Page, Watched]]
) -> None:
    page, _ = open_page(PHONE, "light")
    page.goto(server.base + seeded.conversation)
    settled(page)
    code = page.locator("#messages .message.assistant pre")
    expect(code).to_have_attribute("tabindex", "0")
    expect(code).to_have_attribute("aria-label", "Code, scrolls sideways")
    code.focus()
    # The focus shows: a ring of the accent colour around the block.
    expect(code).to_have_css("outline-style", "solid")
    page.keyboard.press("ArrowRight")
    # Chromium scrolls smoothly: the block is on its way once the key is handled.
    page.wait_for_function("block => block.scrollLeft > 0", arg=code.element_handle())
    # What fits is no tab stop: the table, once the window is wide enough for it.
    page.set_viewport_size(DESKTOP)  # type: ignore[arg-type]
    expect(page.locator("#messages .message.assistant table")).not_to_have_attribute(
        "tabindex", "0"
    )
    expect(code).to_have_attribute("tabindex", "0")


def test_problem_7_dark_search_highlights_read_at_4_5_to_1(
    server: Server, seeded: Seeded, open_page: Callable[..., tuple[Page, Watched]]
) -> None:
    page, _ = open_page(DESKTOP, "dark")
    page.goto(server.base + "/")
    page.locator(".search-form input").fill("engines")
    mark = page.locator("#search-results .hit-snippet mark").first
    expect(mark).to_be_visible()
    colors: Any = mark.evaluate(
        "e => [getComputedStyle(e).color, getComputedStyle(e).backgroundColor]"
    )
    assert contrast(*colors) >= 4.5, colors


def contrast(foreground: str, background: str) -> float:
    def luminance(css: str) -> float:
        channels = [int(part) / 255 for part in css[css.index("(") + 1 : -1].split(",")[:3]]
        linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]

    high, low = sorted([luminance(foreground), luminance(background)], reverse=True)
    return (high + 0.05) / (low + 0.05)

"""Rendered replies in a real browser: highlighted code, tables and MathML laid out by Chromium.

The server, its database, the browser and alice's login are test_browser.py's fixtures, imported
here. Replies come from a small OpenAI-compatible server in this process that streams a code
block and holds the reply's end until the test releases it, so the test can look at the page
just before and just after the reply is rendered as Markdown.
"""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from tests.pages import test_browser
from tests.pages.test_browser import Server, home, latest_reply_id, new_conversation, send

pytestmark = pytest.mark.browser

# test_browser.py's fixtures, made this module's (pytest finds fixtures among its attributes).
server = test_browser.server
browser = test_browser.browser
alice_session = test_browser.alice_session
alice = test_browser.alice

CODE = "def add(a, b):\n    return a + b  # the sum\n"
REPLY = (
    "Here is a function that adds two numbers:\n\n```python\n"
    + CODE
    + "```\n\nIt runs in $O(1)$ time.\n"
)
FINISHED_REPLY = (
    "A table of speeds:\n\n| Engine | Tokens/s |\n|:--|--:|\n| vLLM | 95.5 |\n| llama.cpp | 31 |\n\n"
    "```python\n" + CODE + "```\n\nThe identity $e^{i\\pi} + 1 = 0$ holds.\n"
)

# Runs in the server's environment: alice's conversation with a finished reply, as stored.
SEED_SCRIPT = """
import json, sys, django
django.setup()
from django.contrib.auth import get_user_model
from conversations.models import Conversation, Message
alice = get_user_model().objects.get(username="alice")
conversation = Conversation.objects.create(owner=alice, title="Rendering")
Message.objects.create(conversation=conversation, role="user", content="Show me code")
Message.objects.create(
    conversation=conversation, role="assistant", content=sys.argv[1], status="complete"
)
print(json.dumps(conversation.get_absolute_url()))
"""


class StreamingCoder:
    """/v1/chat/completions streaming REPLY in small pieces; the end waits for release()."""

    def __init__(self) -> None:
        self.released = threading.Event()
        released = self.released

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # /v1/models, for health checks
                body = json.dumps({"object": "list", "data": [{"id": "fake-coder"}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                pieces = [REPLY[i : i + 6] for i in range(0, len(REPLY), 6)]
                for piece in pieces:
                    self.event({"choices": [{"index": 0, "delta": {"content": piece}}]})
                    time.sleep(0.01)
                released.wait(timeout=30)
                self.event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
                self.event({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 30}})
                self.wfile.write(b"data: [DONE]\n\n")

            def event(self, data: dict[str, Any]) -> None:
                self.wfile.write(f"data: {json.dumps(data)}\n\n".encode())
                self.wfile.flush()

            def log_message(self, *args: Any) -> None:
                pass

        self.http = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.http.server_address[1]}/v1"

    def close(self) -> None:
        self.released.set()
        self.http.shutdown()
        self.http.server_close()


@pytest.fixture(scope="module", autouse=True)
def coder() -> Iterator[StreamingCoder]:
    # Autouse, so it runs before the module's `server` copies os.environ into daphne's env.
    coder = StreamingCoder()
    model = {
        "slug": "coder",
        "name": "Coder",
        "backend": "openai",
        "model": "fake-coder",
        "options": {"base_url": coder.base_url, "timeout": 30},
    }
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CHAT_MODELS", json.dumps([model]))
        yield coder
    coder.close()


def box(page: Page, selector: str) -> dict[str, float]:
    """The element's box. The socket re-renders a finished reply once it connects (its saved
    state), so the element can be between two renders when asked: ask until it is laid out."""
    locator = page.locator(selector).first
    deadline = time.monotonic() + 5
    while (found := locator.bounding_box()) is None and time.monotonic() < deadline:
        page.wait_for_timeout(20)
    assert found is not None, f"{selector} is not rendered"
    return found


def color(page: Page, selector: str) -> str:
    return str(page.locator(selector).first.evaluate("e => getComputedStyle(e).color"))


def test_it_shows_a_finished_reply_highlighted_with_its_table_and_math(
    server: Server, alice: BrowserContext
) -> None:
    url = server.run_script(SEED_SCRIPT, FINISHED_REPLY)
    page = alice.new_page()
    page.goto(server.base + url)
    reply = page.locator("#messages .message.assistant .markdown")

    code = reply.locator("pre.highlight code.language-python")
    expect(code.locator("span.k").first).to_have_text("def")
    expect(code.locator("span.nf")).to_have_text("add")
    expect(code.locator("span.c1")).to_have_text("# the sum")
    # page.js found the block: its toolbar names the language and copies the code as written.
    expect(reply.locator(".code-block .code-toolbar span").first).to_have_text("python")
    expect(reply.locator(".code-block button.copy")).to_be_visible()
    assert code.text_content() == CODE

    expect(reply.locator("table th")).to_have_count(2)
    expect(reply.locator("table td")).to_have_text(["vLLM", "95.5", "llama.cpp", "31"])

    # Chromium lays MathML out: the formula has a size and its exponent sits above its base.
    math = reply.locator("math")
    expect(math).to_have_count(1)
    expect(math).to_be_visible()  # laid out (a bounding box is only there once it is)
    size = box(page, "#messages .message.assistant .markdown math")
    assert size["width"] > 20 and size["height"] > 10, size
    base = box(page, "#messages .message.assistant .markdown math msup > mi")
    exponent = box(page, "#messages .message.assistant .markdown math msup > mrow")
    assert exponent["y"] + exponent["height"] / 2 < base["y"] + base["height"] / 2

    # code.css colours the tokens, differently in each theme.
    plain = color(page, "#messages .markdown pre.highlight code")
    light = color(page, "#messages .markdown span.k")
    assert light != plain
    page.emulate_media(color_scheme="dark")
    expect(page.locator("#messages .markdown span.k").first).not_to_have_css("color", light)


def test_a_streamed_code_block_is_highlighted_as_soon_as_it_is_whole_and_never_moves(
    server: Server, alice: BrowserContext, coder: StreamingCoder
) -> None:
    coder.released.clear()
    page = home(alice, server.base)
    new_conversation(page)
    send(page, "Write add()")
    reply_id = latest_reply_id(page)
    body = page.locator(f"#{reply_id}-body")

    # Streaming: the whole blocks are rendered as they will stay (the code block highlighted),
    # and the paragraph being written as it will be (its formula already MathML).
    expect(body).to_have_class("body streaming")
    code = page.locator(f"#{reply_id}-body pre.highlight code.language-python")
    expect(code.locator("span.k").first).to_have_text("def")
    expect(page.locator(f"#{reply_id}-writing p")).to_contain_text("It runs in")
    expect(page.locator(f"#{reply_id}-writing p math")).to_have_count(1)
    page.evaluate("() => { window.notReloaded = true; }")
    before = box(page, f"#{reply_id}-body pre.highlight")

    coder.released.set()
    expect(page.locator(f"#{reply_id}")).to_have_attribute("data-status", "complete")
    code = page.locator(f"#{reply_id}-body pre.highlight code.language-python")
    expect(code.locator("span.nf")).to_have_text("add")
    expect(page.locator(f"#{reply_id}-body math")).to_have_count(1)
    expect(page.locator(f"#{reply_id} .code-toolbar span").first).to_have_text("python")
    assert code.text_content() == CODE
    assert page.evaluate("() => window.notReloaded === true"), "the page was reloaded"

    # No jump at the end: the block rendered while streaming stays where it was.
    after = box(page, f"#{reply_id}-body pre.highlight")
    assert abs(after["y"] - before["y"]) < 1, (before, after)
    assert abs(after["height"] - before["height"]) < 1, (before, after)

"""Issue 30, problem 1 in Chromium: a reply's Markdown is shown in its final form while it streams
(a poem's line breaks, an unfinished table as a table, an open code fence as a code box, a
half-written **bold** as bold), and nothing moves when it ends.

The server, its database, the browser and alice's login are test_browser.py's fixtures. The reply
comes from a small OpenAI-compatible server in this process that streams it in stages and waits
between them until the test moves it on, so the test looks at the page at each stage.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from tests.pages import test_browser
from tests.pages.test_browser import Server, home, latest_reply_id, new_conversation, send

pytestmark = pytest.mark.browser

server = test_browser.server
browser = test_browser.browser
alice_session = test_browser.alice_session
alice = test_browser.alice

POEM = "Roses are red,\nViolets are blue,\nSugar is sweet,\nAnd so are you."
# The reply in the stages the test looks at, each one where the block being written is unfinished.
STAGES = [
    POEM,
    "\n\n| Engine | Tokens/s |\n|:--|--",
    ":|\n| vLLM | 95.5 |\n\n```python\nprint('hi')\n",
    "```\n\nSee https://example.com/docs and ~~this~~ **that",
    "** one.\n\n- [x] done\n- [ ] to do\n",
]


class StagedWriter:
    """/v1/chat/completions streaming STAGES; before each stage after the first it waits for
    `next_stage()`."""

    def __init__(self) -> None:
        self.go = [threading.Event() for _ in STAGES]
        go = self.go

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # /v1/models, for health checks
                self.reply(json.dumps({"object": "list", "data": [{"id": "staged"}]}).encode())

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                for stage, text in enumerate(STAGES):
                    go[stage].wait(timeout=60)
                    for i in range(0, len(text), 5):  # a few characters a delta, as a model
                        self.event(
                            {"choices": [{"index": 0, "delta": {"content": text[i : i + 5]}}]}
                        )
                self.event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
                self.event({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 40}})
                self.wfile.write(b"data: [DONE]\n\n")

            def reply(self, body: bytes) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def event(self, data: dict[str, Any]) -> None:
                self.wfile.write(f"data: {json.dumps(data)}\n\n".encode())
                self.wfile.flush()

            def log_message(self, *args: Any) -> None:
                pass

        self.http = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def next_stage(self, stage: int) -> None:
        self.go[stage].set()

    def close(self) -> None:
        for event in self.go:
            event.set()
        self.http.shutdown()
        self.http.server_close()


@pytest.fixture(scope="module", autouse=True)
def writer() -> Iterator[StagedWriter]:
    # Autouse, so it runs before the module's `server` copies os.environ into daphne's env.
    writer = StagedWriter()
    port = writer.http.server_address[1]
    model = {
        "slug": "staged",
        "name": "Staged",
        "backend": "openai",
        "model": "staged",
        "options": {"base_url": f"http://127.0.0.1:{port}/v1", "timeout": 60},
    }
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CHAT_MODELS", json.dumps([model]))
        yield writer
    writer.close()


def top_and_height(page: Page, selector: str) -> tuple[float, float]:
    found = page.locator(selector).first.evaluate(
        "e => { const r = e.getBoundingClientRect(); return [r.top, r.height]; }"
    )
    return float(found[0]), float(found[1])


def test_problem_1_markdown_is_shown_in_its_final_form_while_it_streams_and_nothing_jumps(
    server: Server, alice: BrowserContext, writer: StagedWriter
) -> None:
    page = home(alice, server.base)
    page.set_viewport_size({"width": 1280, "height": 2000})  # the whole reply in view: no scroll
    new_conversation(page)
    send(page, "A poem, a table and some code")
    reply = f"#{latest_reply_id(page)}"
    writing = page.locator(f"{reply}-writing")

    writer.next_stage(0)  # the poem, its last line being written: four lines already
    expect(writing.locator("p")).to_contain_text("And so are you.")
    expect(writing.locator("p br")).to_have_count(3)
    poem = top_and_height(page, f"{reply}-body p")

    writer.next_stage(1)  # a table whose delimiter row is being written: a table already
    expect(writing.locator("table th")).to_have_text(["Engine", "Tokens/s"])
    assert page.locator(f"{reply}-body .written p br").count() == 3
    assert top_and_height(page, f"{reply}-body p") == poem

    writer.next_stage(2)  # an open code fence: a code box, in the code's font
    expect(writing.locator("pre.highlight code.language-python")).to_have_text("print('hi')\n")
    font = writing.locator("pre code").evaluate("e => getComputedStyle(e).fontFamily")
    assert "monospace" in font, font
    table = top_and_height(page, f"{reply}-body table")

    writer.next_stage(3)  # a sentence with a link, a struck word and half of a bold one
    expect(writing.locator("strong")).to_have_text("that")
    expect(writing.locator("s")).to_have_text("this")
    expect(writing.locator("a")).to_have_attribute("href", "https://example.com/docs")
    code = top_and_height(page, f"{reply}-body pre")
    assert "**" not in writing.inner_text()

    writer.next_stage(4)  # the end
    expect(page.locator(reply)).to_have_attribute("data-status", "complete")
    body = page.locator(f"{reply}-body")
    expect(body.locator("input[type=checkbox]")).to_have_count(2)
    expect(body.locator("input[type=checkbox]:checked")).to_have_count(1)
    for box in body.locator("input[type=checkbox]").all():
        expect(box).to_be_disabled()
    expect(body.locator("p strong")).to_have_text("that")
    # Nothing moved when the reply ended: each block is where it was, the size it was.
    assert top_and_height(page, f"{reply}-body p") == poem
    assert top_and_height(page, f"{reply}-body table") == table
    assert top_and_height(page, f"{reply}-body pre") == code

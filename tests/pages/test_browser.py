"""The chat page in a real browser: Debian's chromium, driven by Playwright, against daphne.

The server is the real ASGI app in its own process with DEBUG off, so it reads a database of its
own (a fresh PostgreSQL database when DATABASE_URL points at PostgreSQL, else a temporary SQLite
file) and serves collectstatic's output through WhiteNoise.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect, sync_playwright

from tests.support.launch import (
    ROOT,
    loopback_listener,
    start_server,
    stop_servers,
    wait_until_serving,
)
from tests.support.replies import full_reply
from tests.support.servers import answers

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
TOKENS = 400
FULL_REPLY = full_reply(TOKENS).strip()
PASSWORDS = {"alice": "alice-password", "charlie": "charlie-password"}

# Runs in the server's environment: the schema, the static files, and the test's data.
SETUP_SCRIPT = """
import json, django
django.setup()
from django.contrib.auth import get_user_model
from django.core.management import call_command
from conversations.models import Conversation
call_command("migrate", verbosity=0, interactive=False)
call_command("collectstatic", verbosity=0, interactive=False)
users = {n: get_user_model().objects.create_user(n, password=n + "-password") for n in ("alice", "charlie")}
secret = Conversation.objects.create(owner=users["alice"], title="Alice's private plans")
print(json.dumps({"alice_conversation": str(secret.pk)}))
"""


# Runs in the server's environment: the contents of one conversation's messages, as stored.
STORED_SCRIPT = """
import json, sys, django
django.setup()
from conversations.models import Message
contents = Message.objects.filter(conversation_id=sys.argv[1]).values_list("content", flat=True)
print(json.dumps(list(contents)))
"""


@dataclass
class Server:
    base: str
    port: int
    alice_conversation: str
    env: dict[str, str]

    def stored_messages(self, conversation: str) -> list[str]:
        return list(self.run_script(STORED_SCRIPT, conversation))

    def run_script(self, script: str, *args: str) -> Any:
        """Run `script` in the server's environment (its database); the JSON it printed last."""
        result = subprocess.run(
            [sys.executable, "-c", script, *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout.strip().splitlines()[-1])


@contextlib.contextmanager
def server_database(tmp: Path) -> Iterator[str]:
    """A database only the served app and this module use, dropped afterwards."""
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        yield f"sqlite:///{tmp / 'browser.sqlite3'}"
        return
    import psycopg
    from psycopg import sql

    parts = urlsplit(url)
    name = f"chatsite_browser_{uuid.uuid4().hex[:12]}"
    maintenance = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(maintenance, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield urlunsplit(parts._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(maintenance, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    tmp = tmp_path_factory.mktemp("browser")
    with server_database(tmp) as database_url:
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "chatsite.settings",
            "DEBUG": "0",
            "SECURE_COOKIES": "0",  # the browser talks plain HTTP to 127.0.0.1
            "SECRET_KEY": "browser-tests-only-secret-key",
            "ALLOWED_HOSTS": "127.0.0.1",
            "DATABASE_URL": database_url,
            "STATIC_ROOT": str(tmp / "static"),
            # Its own rate counters: every module's server has a user alice with the same id,
            # and Redis (shared by all of them) would add up their sends.
            "CACHE_KEY_PREFIX": f"browser-{uuid.uuid4().hex}",
            "CHAT_ENGINE": "scripted",
            "CHAT_SCRIPTED_TOKENS": str(TOKENS),
            "CHAT_SCRIPTED_DELAY_MS": "30",
            "CHAT_MAX_TOKENS": str(TOKENS),
            # Several tests leave replies running; the per-user limit is not what they test.
            "CHAT_MAX_ACTIVE_PER_USER": "20",
        }
        setup = subprocess.run(
            [sys.executable, "-c", SETUP_SCRIPT],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=90,
        )
        assert setup.returncode == 0, setup.stderr
        data = json.loads(setup.stdout.strip().splitlines()[-1])
        # daphne gets an already listening socket, so no other process can take the port first.
        listener = loopback_listener()
        port = listener.getsockname()[1]
        log = tmp / "daphne.log"
        process = start_server(listen=listener, env=env, log=log)
        listener.close()
        base = f"http://127.0.0.1:{port}"
        try:
            wait_until_serving(
                process,
                answers(f"{base}/accounts/login/"),
                name="daphne",
                log=log.read_text,
                interval=0.2,
            )
            yield Server(
                base=base, port=port, alice_conversation=data["alice_conversation"], env=env
            )
        finally:
            stop_servers([process], grace=10)


@pytest.fixture(scope="module")
def browser(server: Server) -> Iterator[Browser]:
    expect.set_options(timeout=15_000)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        yield browser
        browser.close()


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    context = browser.new_context(viewport={"width": 1100, "height": 720})
    yield context
    context.close()


@pytest.fixture(scope="module")
def alice_session(
    browser: Browser, server: Server, tmp_path_factory: pytest.TempPathFactory
) -> str:
    """Alice logs in through the form once; her session cookie is reused by the tests."""
    context = browser.new_context()
    log_in(context, server.base, "alice")
    path = str(tmp_path_factory.mktemp("alice") / "state.json")
    context.storage_state(path=path)
    context.close()
    return path


@pytest.fixture
def alice(browser: Browser, alice_session: str) -> Iterator[BrowserContext]:
    context = browser.new_context(
        viewport={"width": 1100, "height": 720}, storage_state=alice_session
    )
    # An exception in the page's scripts fails the test even when the page still looks right.
    script_errors: list[str] = []
    context.on("weberror", lambda error: script_errors.append(str(error.error)))
    yield context
    context.close()
    assert not script_errors, script_errors


def home(context: BrowserContext, base: str) -> Page:
    page = context.new_page()
    page.goto(f"{base}/")
    return page


def log_in(context: BrowserContext, base: str, username: str) -> Page:
    page = context.new_page()
    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORDS[username])
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(f"{base}/")
    return page


def new_conversation(page: Page) -> str:
    page.get_by_role("button", name="New conversation").click()
    expect(page.locator("section.chat[data-socket=open]")).to_be_visible()
    return page.url


def open_tab(context: BrowserContext, url: str) -> Page:
    page = context.new_page()
    page.goto(url)
    expect(page.locator("section.chat[data-socket=open]")).to_be_visible()
    return page


def send(page: Page, text: str) -> None:
    page.locator("#send-form textarea").fill(text)
    page.locator("#send-form textarea").press("Enter")


def latest_reply_id(page: Page) -> str:
    reply = page.locator("#messages .message.assistant").last
    expect(reply).to_be_attached()
    return reply.get_attribute("id") or ""


def body_text(page: Page, reply_id: str) -> str:
    return page.locator(f"#{reply_id}-body").text_content() or ""


def wait_for_growth(page: Page, reply_id: str, beyond: int) -> int:
    """Wait until the reply's body holds more than `beyond` characters; return how many."""
    page.wait_for_function(
        "([id, n]) => (document.getElementById(id)?.textContent.length ?? 0) > n",
        arg=[f"{reply_id}-body", beyond],
    )
    return len(body_text(page, reply_id))


def assert_prefix_of_reply(text: str) -> None:
    """Streamed text must be the reply's beginning: no character lost, none shown twice."""
    assert text.strip(), "the reply shows no text"
    assert FULL_REPLY.startswith(text.strip()), f"not a prefix of the reply: {text[:200]!r}"


def test_it_streams_a_reply_and_stops_it_from_a_second_tab(
    server: Server, alice: BrowserContext, tmp_path: Path
) -> None:
    page = home(alice, server.base)
    url = new_conversation(page)
    send(page, "Tell me the alphabet")
    expect(page.locator("#messages .message.user .body")).to_have_text("Tell me the alphabet")
    reply_id = latest_reply_id(page)

    # The body grows while the reply streams.
    shown = wait_for_growth(page, reply_id, 0)
    for _ in range(3):
        shown = wait_for_growth(page, reply_id, shown)
    assert_prefix_of_reply(body_text(page, reply_id))
    expect(page.locator("#stop-button")).to_be_enabled()
    screenshot = Path(os.environ.get("BROWSER_SCREENSHOTS", tmp_path)) / "chat-streaming.png"
    page.screenshot(path=str(screenshot))

    second = open_tab(alice, url)
    expect(second.locator("#stop-button")).to_be_enabled()
    wait_for_growth(second, reply_id, 0)
    second.locator("#stop-button").click()

    for tab in (page, second):
        expect(tab.locator(f"#{reply_id} .marker.stopped")).to_have_text("Stopped.")
        expect(tab.locator(f"#{reply_id}")).to_have_attribute("data-status", "cancelled")
        expect(tab.locator("#stop-button")).to_be_disabled()
    saved = body_text(page, reply_id)
    assert_prefix_of_reply(saved)
    assert len(saved.strip()) < len(FULL_REPLY), "Stop came too late to stop anything"
    assert body_text(second, reply_id) == saved

    page.reload()
    expect(page.locator(f"#{reply_id} .marker.stopped")).to_have_text("Stopped.")
    assert body_text(page, reply_id) == saved
    expect(page.locator("#stop-button")).to_be_disabled()


def test_it_inserts_a_newline_on_shift_enter_and_sends_on_enter(
    server: Server, alice: BrowserContext
) -> None:
    page = home(alice, server.base)
    new_conversation(page)
    textarea = page.locator("#send-form textarea")
    textarea.fill("line one")
    textarea.press("Shift+Enter")
    textarea.press_sequentially("line two")
    expect(textarea).to_have_value("line one\nline two")

    textarea.press("Enter")
    # One user message with both lines: Shift+Enter sent nothing of its own.
    user_messages = page.locator("#messages .message.user")
    expect(user_messages).to_have_count(1)
    expect(user_messages.locator(".body")).to_have_text("line one\nline two")
    expect(textarea).to_have_value("")
    page.locator("#stop-button").click()
    expect(page.locator("#stop-button")).to_be_disabled()


def test_it_shows_html_in_a_message_as_text(server: Server, alice: BrowserContext) -> None:
    page = home(alice, server.base)
    new_conversation(page)
    send(page, "<b>x</b>")
    body = page.locator("#messages .message.user .body")
    expect(body).to_have_text("<b>x</b>")
    wait_for_growth(page, latest_reply_id(page), 0)
    assert page.locator("#messages b").count() == 0
    page.locator("#stop-button").click()
    expect(page.locator("#stop-button")).to_be_disabled()
    page.reload()
    expect(body).to_have_text("<b>x</b>")
    assert page.locator("#messages b").count() == 0


def test_it_refuses_a_strangers_conversation(server: Server, context: BrowserContext) -> None:
    page = log_in(context, server.base, "charlie")
    response = page.goto(f"{server.base}/conversations/{server.alice_conversation}/")
    assert response is not None and response.status == 404
    assert "Alice's private plans" not in page.content()


def test_it_requires_a_login_for_the_chat_page(server: Server, context: BrowserContext) -> None:
    page = context.new_page()
    chat_url = f"{server.base}/conversations/{server.alice_conversation}/"
    page.goto(chat_url)
    expect(page).to_have_url(
        f"{server.base}/accounts/login/?next=/conversations/{server.alice_conversation}/"
    )
    assert "Alice's private plans" not in page.content()
    page.fill("#id_username", "alice")
    page.fill("#id_password", PASSWORDS["alice"])
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(chat_url)
    expect(page.locator(".chat-header input[name=title]")).to_have_value("Alice's private plans")


class CuttableProxy:
    """Forwards a loopback port to the server and can cut every connection at once.

    A cut closes the TCP connections without a WebSocket close frame, which the browser reports
    as 1006 (abnormal closure), as it would when a network drops. While held, new connections
    wait unanswered until release, so the page stays disconnected as long as the test wants.
    """

    def __init__(self, target_port: int):
        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.open = threading.Event()
        self.open.set()
        self.lock = threading.Lock()
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def cut_and_hold(self) -> None:
        self.open.clear()
        with self.lock:
            sockets, self.sockets = self.sockets, []
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def release(self) -> None:
        self.open.set()

    def close(self) -> None:
        self.listener.close()
        self.cut_and_hold()
        self.release()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        self.open.wait()
        try:
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
        except OSError:
            client.close()
            return
        with self.lock:
            self.sockets += [client, upstream]
        threading.Thread(target=self._pump, args=(upstream, client), daemon=True).start()
        self._pump(client, upstream)

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


@pytest.fixture
def proxy(server: Server) -> Iterator[CuttableProxy]:
    proxy = CuttableProxy(server.port)
    yield proxy
    proxy.close()


def test_it_catches_up_after_the_socket_reconnects(
    server: Server, alice: BrowserContext, proxy: CuttableProxy
) -> None:
    # The first tab reaches the server through the proxy (cookies ignore the port); the second
    # one directly.
    page = home(alice, f"http://127.0.0.1:{proxy.port}")
    url = new_conversation(page)
    direct = url.replace(f":{proxy.port}/", f":{server.port}/")
    send(page, "Count for me")
    reply_id = latest_reply_id(page)
    wait_for_growth(page, reply_id, 0)
    status = page.locator("#connection-status")
    expect(status).to_be_hidden()

    # 1. Cut mid-reply: the page says so, then resumes from a snapshot of the text so far.
    proxy.cut_and_hold()
    expect(status).to_be_visible()
    expect(status).to_contain_text("Reconnecting")
    frozen = len(body_text(page, reply_id))
    other = open_tab(alice, direct)
    missed = wait_for_growth(other, reply_id, frozen + 40)
    proxy.release()
    expect(page.locator("section.chat[data-socket=open]")).to_be_visible()
    expect(status).to_be_hidden()
    wait_for_growth(page, reply_id, missed)
    assert_prefix_of_reply(body_text(page, reply_id))
    expect(page.locator("#stop-button")).to_be_enabled()

    # 2. Cut while the other tab stops the reply: the saved state on reconnect settles the page.
    proxy.cut_and_hold()
    other.locator("#stop-button").click()
    expect(other.locator(f"#{reply_id}")).to_have_attribute("data-status", "cancelled")
    expect(page.locator(f"#{reply_id}")).to_have_attribute("data-status", "streaming")
    expect(page.locator("#stop-button")).to_be_disabled()  # while down (issue 30, problem 3)
    proxy.release()
    expect(page.locator(f"#{reply_id}")).to_have_attribute("data-status", "cancelled")
    expect(page.locator(f"#{reply_id} .marker.stopped")).to_have_text("Stopped.")
    expect(page.locator("#stop-button")).to_be_disabled()
    assert body_text(page, reply_id) == body_text(other, reply_id)
    assert_prefix_of_reply(body_text(page, reply_id))

    # 3. Cut while another tab sends: the page learns of messages it never saw start.
    proxy.cut_and_hold()
    expect(status).to_be_visible()
    page.locator("#send-form textarea").fill("a draft that must survive")
    send(other, "And again")
    expect(other.locator("#messages .message.user")).to_have_count(2)
    second_reply = latest_reply_id(other)
    assert second_reply != reply_id
    wait_for_growth(other, second_reply, 0)
    proxy.release()
    expect(page.locator("#messages .message.user")).to_have_count(2)
    expect(page.locator(f"#{second_reply}")).to_be_attached()
    wait_for_growth(page, second_reply, 0)
    assert_prefix_of_reply(body_text(page, second_reply))
    expect(page.locator("#send-form textarea")).to_have_value("a draft that must survive")
    page.locator("#stop-button").click()
    for tab in (page, other):
        expect(tab.locator(f"#{second_reply} .marker.stopped")).to_have_text("Stopped.")


# Opens alice's socket from whatever page runs it and records what happens in `window.result`.
OPEN_SOCKET_SCRIPT = """
({url, content}) => {
  window.result = {opened: false, closed: null, messages: []};
  const socket = new WebSocket(url, "chatsite.v1.json");
  socket.onopen = () => {
    window.result.opened = true;
    if (content) socket.send(JSON.stringify({action: "send", content: content}));
  };
  socket.onmessage = (event) => window.result.messages.push(event.data);
  socket.onclose = (event) => { window.result.closed = event.code; };
  window.socket = socket;
}
"""
SOCKET_SETTLED = (
    "() => window.result && (window.result.closed !== null || window.result.messages.length > 0)"
)


@contextlib.contextmanager
def other_site(html: str) -> Iterator[str]:
    """A plain HTTP server on another loopback port serving one page: the attacker's site."""

    class OnePage(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = html.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass  # keep the test output quiet

    site = http.server.ThreadingHTTPServer(("127.0.0.1", 0), OnePage)
    threading.Thread(target=site.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{site.server_address[1]}/"
    finally:
        site.shutdown()
        site.server_close()


def test_a_message_sent_while_disconnected_says_it_waits_then_goes(
    server: Server, alice: BrowserContext, proxy: CuttableProxy
) -> None:
    page = home(alice, f"http://127.0.0.1:{proxy.port}")
    new_conversation(page)
    status = page.locator("#connection-status")
    proxy.cut_and_hold()
    expect(page.locator("section.chat[data-socket=open]")).to_have_count(0)

    send(page, "Sent while offline")
    expect(status).to_have_text(
        "Not connected. Your message will be sent when the connection is back."
    )
    expect(page.locator("#messages .message.user")).to_have_count(0)
    expect(page.locator("#send-form textarea")).to_have_value("Sent while offline")

    proxy.release()
    expect(page.locator("#messages .message.user")).to_have_text(re.compile("Sent while offline"))
    expect(status).to_be_hidden()
    expect(page.locator("#send-form textarea")).to_have_value("")


def test_it_refuses_alice_s_socket_opened_by_a_page_on_another_port(
    server: Server, alice: BrowserContext
) -> None:
    socket_url = f"ws://127.0.0.1:{server.port}/ws/conversations/{server.alice_conversation}/"

    # Control: from our own page the same script opens her socket, so a refusal below is the
    # origin check's doing, not a wrong URL, subprotocol or cookie.
    ours = home(alice, server.base)
    ours.evaluate(OPEN_SOCKET_SCRIPT, {"url": socket_url, "content": None})
    ours.wait_for_function("() => window.result.opened")
    ours.evaluate("() => window.socket.close()")
    ours.close()

    # Same host, another port: the browser sends alice's cookies (they ignore the port).
    script = f"({OPEN_SOCKET_SCRIPT})({json.dumps({'url': socket_url, 'content': 'stolen'})});"
    with other_site(f"<!doctype html><script>{script}</script>") as url:
        page = alice.new_page()
        page.goto(url)
        page.wait_for_function(SOCKET_SETTLED)
        result = page.evaluate("() => window.result")
    assert not result["opened"] and result["messages"] == [], result
    assert result["closed"] == 1006, result  # the handshake was refused (HTTP 403)
    assert "stolen" not in server.stored_messages(server.alice_conversation)

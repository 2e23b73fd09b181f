"""Outages told as they are (issue 30, problem 3), in Chromium: a socket that goes down, a server
killed mid-reply and started again, an account deactivated while its reply is written.

The server, its database, the browser and alice's login are tests/pages/test_browser.py's
fixtures; a page reaches a server through a CuttableProxy, which cuts its connections (the
browser sees 1006, as when a network drops) and holds new ones until released. The crash test
runs daphne processes of its own on the same database, killed with -9 and started again.
"""

from __future__ import annotations

import contextlib
import re
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from tests.pages import test_browser
from tests.pages.test_browser import (
    CuttableProxy,
    Server,
    body_text,
    home,
    latest_reply_id,
    new_conversation,
    send,
    wait_for_growth,
)
from tests.support.launch import loopback_listener, start_server, stop_servers, wait_until_serving
from tests.support.servers import answers

pytestmark = [pytest.mark.browser]

server = test_browser.server
browser = test_browser.browser
alice_session = test_browser.alice_session
alice = test_browser.alice
proxy = test_browser.proxy
context = test_browser.context

# Runs in the server's environment: the reply rows of one conversation, oldest first.
REPLIES_SCRIPT = """
import json, sys, django
django.setup()
from conversations.models import Message
rows = Message.objects.filter(conversation_id=sys.argv[1]).order_by("created_at", "id")
print(json.dumps(list(rows.values("role", "content", "status", "cancelled_by"))))
"""

# Run in the server's environment: a user of this module's own (a superuser with a second
# argument), and a user's deactivation.
MAKE_USER_SCRIPT = """
import json, sys, django
django.setup()
from django.contrib.auth import get_user_model
make = get_user_model().objects.create_superuser if sys.argv[2] else get_user_model().objects.create_user
user = make(sys.argv[1], password=sys.argv[1] + "-password")
print(json.dumps(user.pk))
"""
DEACTIVATE_SCRIPT = """
import json, sys, django
django.setup()
from django.contrib.auth import get_user_model
user = get_user_model().objects.get(username=sys.argv[1])
user.is_active = False
user.save()
print(json.dumps(True))
"""


def conversation_of(page: Page) -> str:
    return page.locator("section.chat").get_attribute("data-conversation") or ""


def rows_of(server: Server, conversation: str) -> list[dict[str, str]]:
    return list(server.run_script(REPLIES_SCRIPT, conversation))


class SwallowingProxy(CuttableProxy):
    """A CuttableProxy that can also let a socket look open while one direction carries
    nothing: what the page sends (or what the server answers) is dropped, as on a link that died
    without either end knowing yet."""

    def __init__(self, target_port: int):
        self.swallowing: set[str] = set()  # "up" (page to server), "down" (server to page)
        super().__init__(target_port)

    def _serve(self, client: socket.socket) -> None:
        self.open.wait()
        try:
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
        except OSError:
            client.close()
            return
        with self.lock:
            self.sockets += [client, upstream]
        threading.Thread(target=self._carry, args=(upstream, client, "down"), daemon=True).start()
        self._carry(client, upstream, "up")

    def _carry(self, source: socket.socket, sink: socket.socket, direction: str) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                if direction not in self.swallowing:
                    sink.sendall(data)
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.close()


@pytest.fixture
def swallowing_proxy(server: Server) -> Iterator[SwallowingProxy]:
    proxy = SwallowingProxy(server.port)
    yield proxy
    proxy.close()


def test_problem_3_while_the_socket_is_down_the_reply_says_reconnecting_and_stop_is_disabled(
    server: Server, alice: BrowserContext, proxy: CuttableProxy
) -> None:
    page = home(alice, f"http://127.0.0.1:{proxy.port}")
    new_conversation(page)
    send(page, "Count for me")
    reply_id = latest_reply_id(page)
    wait_for_growth(page, reply_id, 0)
    reply = page.locator(f"#{reply_id}")
    stop = page.locator("#stop-button")
    expect(reply.locator(".badge")).to_have_text("writing…")
    expect(stop).to_be_enabled()

    proxy.cut_and_hold()
    expect(page.locator("#connection-status")).to_have_text("Connection lost. Reconnecting…")
    expect(reply.locator(".badge")).to_have_text("reconnecting…")
    expect(stop).to_be_disabled()
    page.keyboard.press("Escape")  # Stop's shortcut does nothing either: nobody would hear it

    proxy.release()
    expect(page.locator("#connection-status")).to_be_hidden()
    expect(reply.locator(".badge")).to_have_text("writing…")
    expect(stop).to_be_enabled()
    stop.click()
    expect(reply).to_have_attribute("data-status", "cancelled")


@pytest.mark.parametrize("lost", ["the message", "the answer"])
def test_problem_3_a_message_lost_with_its_socket_is_sent_again_exactly_once(
    server: Server, alice: BrowserContext, swallowing_proxy: SwallowingProxy, lost: str
) -> None:
    """The socket looks open, but what the page sends never arrives (or the server's answer
    never comes back); then the connection drops. The page sends the message again once the
    socket is back, with the same idempotency key: it is saved and shown once."""
    page = home(alice, f"http://127.0.0.1:{swallowing_proxy.port}")
    new_conversation(page)
    conversation = conversation_of(page)
    swallowing_proxy.swallowing.add("up" if lost == "the message" else "down")
    text = f"Typed before the drop ({lost})"
    send(page, text)
    expect(page.locator("#send-form textarea")).to_have_value("")  # it left, as far as it knows
    if lost == "the answer":  # the server has it: a reply is written that the page never sees
        until(lambda: len(rows_of(server, conversation)) == 2, "the send saved")

    swallowing_proxy.cut_and_hold()
    swallowing_proxy.swallowing.clear()
    status = page.locator("#connection-status")
    expect(status).to_have_text(
        "Not connected. Your message will be sent when the connection is back."
    )
    expect(page.locator("#send-form textarea")).to_have_value(text)

    swallowing_proxy.release()
    expect(page.locator("#messages .message.user")).to_have_count(1)
    expect(page.locator("#messages .message.user .body")).to_have_text(text)
    expect(page.locator("#messages .message.assistant")).to_have_count(1)
    expect(status).to_be_hidden()
    expect(page.locator("#send-form textarea")).to_have_value("")
    expect(page.locator("#chat-errors")).to_have_text("")
    page.locator("#stop-button").click()
    expect(page.locator("#messages .message.assistant")).not_to_have_attribute(
        "data-status", re.compile("pending|streaming")
    )
    stored = rows_of(server, conversation)
    assert [row["content"] for row in stored if row["role"] == "user"] == [text]


@dataclass
class OwnDaphne:
    port: int
    process: subprocess.Popen[bytes]

    def kill(self) -> None:
        """kill -9: no cleanup, as a crash or the OOM killer leaves it."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()


@contextlib.contextmanager
def own_daphne(server: Server, tmp: Path, name: str, **settings: str) -> Iterator[OwnDaphne]:
    """A daphne of this test's own on the module's database."""
    listener = loopback_listener()
    port: int = listener.getsockname()[1]
    log = tmp / f"{name}.log"
    process = start_server(listen=listener, env={**server.env, **settings}, log=log)
    listener.close()
    try:
        wait_until_serving(
            process,
            answers(f"http://127.0.0.1:{port}/accounts/login/"),
            name=name,
            log=log.read_text,
            interval=0.2,
        )
        yield OwnDaphne(port, process)
    finally:
        stop_servers([process], grace=5)


# A flush every second; a reply without one for six is settled as interrupted.
CRASH_SETTINGS = {"CHAT_FLUSH_INTERVAL_S": "1", "CHAT_HEARTBEAT_TIMEOUT_S": "6"}

# Runs in the server's environment: settles replies whose process died; prints how many.
SETTLE_SCRIPT = """
import json, django
django.setup()
from conversations.generation.recovery import replies_mark_interrupted
print(json.dumps(replies_mark_interrupted()))
"""


@pytest.mark.parametrize("settled", ["before the tab is back", "while the tab watches"])
def test_problem_3_after_a_crash_the_tab_never_shows_less_than_it_had_shown(
    server: Server, alice: BrowserContext, tmp_path: Path, settled: str
) -> None:
    """The tab had more than the row: the server died between two flushes. Settled before the
    tab reconnects, the saved reply comes whole; settled while it watches (its process seemed
    alive), the saved text comes as a snapshot first. Either way the tab keeps what it showed."""
    with own_daphne(server, tmp_path, "first", **CRASH_SETTINGS) as first:
        proxy = CuttableProxy(first.port)
        try:
            page = home(alice, f"http://127.0.0.1:{proxy.port}")
            new_conversation(page)
            conversation = conversation_of(page)
            send(page, "Count for me")
            reply_id = latest_reply_id(page)
            wait_for_growth(page, reply_id, 300)
            proxy.cut_and_hold()
            first.kill()  # with the text it had not flushed yet
            expect(page.locator("#connection-status")).to_contain_text("Reconnecting")
            shown = body_text(page, reply_id)
            if settled == "before the tab is back":
                until(lambda: server.run_script(SETTLE_SCRIPT) == 1, "the reply settled")

            with own_daphne(server, tmp_path, "second", **CRASH_SETTINGS) as second:
                proxy.target_port = second.port
                proxy.release()
                reply = page.locator(f"#{reply_id}")
                expect(reply).to_have_attribute("data-status", "interrupted", timeout=30_000)
                saved = next(r for r in rows_of(server, conversation) if r["role"] == "assistant")
                recovered = body_text(page, reply_id)
                assert len(recovered) >= len(shown), (len(recovered), len(shown))
                note = reply.locator(".marker.unsaved")
                if len(saved["content"]) < len(shown):  # text came after the last flush
                    assert recovered == shown
                    expect(note).to_contain_text("characters shown here were lost")
                else:
                    expect(note).to_have_count(0)
        finally:
            proxy.close()


def until(check: Callable[[], bool], what: str, timeout_s: float = 30) -> None:
    """Wait for `check` (a look at the server's database) to hold."""
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.1)


def log_in_as(context: BrowserContext, server: Server, username: str) -> Page:
    page = context.new_page()
    page.goto(f"{server.base}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", f"{username}-password")
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(f"{server.base}/")
    return page


@pytest.mark.parametrize("where", ["the admin", "another process"])
def test_problem_3_a_deactivated_user_s_reply_stops_at_once(
    server: Server, browser: Browser, context: BrowserContext, where: str
) -> None:
    """Deactivated while the reply is written, by staff in the admin (unticking Active) or by
    another process (a script): the reply stops as deactivated, not after the grace period as
    one that nobody watches."""
    username = f"dora{uuid.uuid4().hex[:8]}"
    user_id = server.run_script(MAKE_USER_SCRIPT, username, "")
    page = log_in_as(context, server, username)
    new_conversation(page)
    conversation = conversation_of(page)
    send(page, "Count for me")
    reply_id = latest_reply_id(page)
    wait_for_growth(page, reply_id, 0)

    if where == "the admin":
        staff = f"root{uuid.uuid4().hex[:8]}"
        server.run_script(MAKE_USER_SCRIPT, staff, "superuser")
        with contextlib.closing(browser.new_context()) as staff_context:
            admin = log_in_as(staff_context, server, staff)
            admin.goto(f"{server.base}/admin/auth/user/{user_id}/change/")
            admin.get_by_label("Active").uncheck()
            admin.get_by_role("button", name="Save", exact=True).click()
            expect(admin.locator(".messagelist")).to_contain_text("was changed successfully")
    else:
        server.run_script(DEACTIVATE_SCRIPT, username)

    def reply() -> dict[str, str]:
        return next(row for row in rows_of(server, conversation) if row["role"] == "assistant")

    until(lambda: reply()["status"] == "cancelled", "the reply stopped")
    assert reply()["cancelled_by"] == "deactivated"
    # The tab says so: the reply's end, or (its session over) that it was signed out.
    expect(
        page.locator(
            f"#{reply_id}[data-status=cancelled], #connection-status:has-text('signed out')"
        )
    ).not_to_have_count(0)

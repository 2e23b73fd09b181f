"""The README's screenshots of the chat page, made again from the current code.

    .venv/bin/python scripts/screenshots.py                 # into docs/screenshots/
    .venv/bin/python scripts/screenshots.py --out /tmp/shots

It starts the app as a visitor gets it (daphne, DEBUG off, the scripted engine) on a temporary
SQLite database, writes a demo user and a conversation (code, a table, math) straight into
that database so every run shows the same page, and photographs the chat page with Debian's
chromium through Playwright: desktop (1440x900) and phone (390x844), light and dark. Needs the
dev extra (playwright) and `apt-get install chromium`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# Run as a file, this script has only scripts/ on its path; the server launcher is the tests'.
sys.path.insert(0, str(ROOT))
from tests.support.launch import (  # noqa: E402
    loopback_listener,
    start_server,
    stop_servers,
    wait_until_serving,
)

USERNAME = "demo"
PASSWORD = "demo-password"
SIZES = {"desktop": (1440, 900), "phone": (390, 844)}
SCHEMES = ("light", "dark")
MAX_PNG_BYTES = 300_000

# Runs in the server's environment: the schema, the static files, and the demo's data. Times
# are fixed, so the page reads the same on every run.
SETUP_SCRIPT = r"""
import json, sys, django
from datetime import datetime, timedelta, timezone
django.setup()
from django.contrib.auth import get_user_model
from django.core.management import call_command
from conversations.models import Conversation, Message
from conversations.services.branches import link_as_a_line

call_command("migrate", verbosity=0, interactive=False)
call_command("collectstatic", verbosity=0, interactive=False)
user = get_user_model().objects.create_user(sys.argv[1], password=sys.argv[2])
start = datetime(2025, 3, 14, 9, 30, tzinfo=timezone.utc)

def conversation(title, turns, at):
    chat = Conversation.objects.create(owner=user, title=title, title_is_custom=True)
    for offset, (role, text) in enumerate(turns):
        sent = at + timedelta(minutes=offset)
        message = Message.objects.create(
            conversation=chat, role=role, content=text, status="complete"
        )
        fields = {"created_at": sent}
        if role == "assistant":
            fields.update(
                engine="scripted", model="scripted", model_slug="default",
                first_token_at=sent + timedelta(milliseconds=180),
                finished_at=sent + timedelta(seconds=4),
                prompt_tokens=40 * (offset + 1), completion_tokens=len(text) // 4,
                finish_reason="stop",
            )
        Message.objects.filter(pk=message.pk).update(**fields)
    link_as_a_line(chat.pk)  # one branch: each message follows the one before
    Conversation.objects.filter(pk=chat.pk).update(created_at=at, updated_at=at)
    return chat

for days, title in ((6, "Weekend in Lisbon"), (3, "SQL: top customers by revenue"), (1, "Explain CRDTs simply")):
    conversation(title, [("user", title + "?"), ("assistant", "Here is a short answer.")], start - timedelta(days=days))
chat = conversation("Binary search in Python", json.loads(sys.argv[3]), start)
print(json.dumps(chat.get_absolute_url()))
"""

TURNS = [
    ("user", "How do I find an item in a sorted list quickly in Python?"),
    (
        "assistant",
        "Use **binary search**: each step halves the range, so it needs about $\\log_2 n$ "
        "comparisons instead of $n$. The standard library's `bisect` does the halving:\n\n"
        "```python\n"
        "from bisect import bisect_left\n\n"
        "def find(items: list[int], target: int) -> int:\n"
        '    """The index of target in the sorted list, or -1."""\n'
        "    i = bisect_left(items, target)\n"
        "    if i < len(items) and items[i] == target:\n"
        "        return i\n"
        "    return -1  # not there\n"
        "```\n",
    ),
    ("user", "How does that compare with a plain loop?"),
    (
        "assistant",
        "For a list of $n$ items:\n\n"
        "| Method | Comparisons, worst case | Needs sorted input |\n"
        "|:--|--:|:--:|\n"
        "| Linear scan | $n$ | no |\n"
        "| Binary search | $\\lceil \\log_2 (n+1) \\rceil$ | yes |\n\n"
        "A million items take at most 20 comparisons instead of 1,000,000. Sorting first "
        "costs $O(n \\log n)$, so it pays off when you search the same list many times.",
    ),
]


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


@contextmanager
def live_server(tmp: Path) -> Iterator[tuple[str, str]]:
    """daphne serving a fresh demo database; yields the base URL and the chat page's path."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DATABASE_URL", "REDIS_URL", "CHAT_MODELS"}
    }
    env.update(
        DJANGO_SETTINGS_MODULE="chatsite.settings",
        DEBUG="0",
        SECURE_COOKIES="0",  # plain HTTP to 127.0.0.1
        SECRET_KEY="screenshots-only-secret-key-not-for-anything-else",
        ALLOWED_HOSTS="127.0.0.1",
        DATABASE_URL=f"sqlite:///{tmp / 'demo.sqlite3'}",
        STATIC_ROOT=str(tmp / "static"),
        CHAT_ENGINE="scripted",
        TZ="UTC",
    )
    setup = subprocess.run(
        [sys.executable, "-c", SETUP_SCRIPT, USERNAME, PASSWORD, json.dumps(TURNS)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if setup.returncode != 0:
        raise SystemExit(f"setting up the demo database failed:\n{setup.stderr}")
    chat_path = json.loads(setup.stdout.strip().splitlines()[-1])
    # daphne gets an already listening socket, so no other process can take the port first.
    listener = loopback_listener()
    base = f"http://127.0.0.1:{listener.getsockname()[1]}"
    log_path = tmp / "daphne.log"
    process = start_server(listen=listener, env=env, log=log_path)
    listener.close()
    try:
        try:
            wait_until_serving(
                process,
                lambda: answers(f"{base}/accounts/login/"),
                name="daphne",
                log=log_path.read_text,
                timeout=60,
                interval=0.2,
            )
        except (RuntimeError, TimeoutError) as exc:
            raise SystemExit(str(exc)) from None
        yield base, chat_path
    finally:
        stop_servers([process], grace=10)


def shrink(path: Path) -> None:
    """Fewer colours when a PNG is over the limit (flat UI colours survive 256 well)."""
    if path.stat().st_size <= MAX_PNG_BYTES:
        return
    from PIL import Image  # Pillow comes with the dev extra (matplotlib)

    with Image.open(path) as image:
        image.convert("RGB").quantize(colors=256).save(path, optimize=True)


def photograph(base: str, chat_path: str, out: Path, chromium: str) -> list[Path]:
    from playwright.sync_api import expect, sync_playwright

    shots: list[Path] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium, args=["--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
        )
        login = browser.new_context()
        page = login.new_page()
        page.goto(f"{base}/accounts/login/")
        page.fill("#id_username", USERNAME)
        page.fill("#id_password", PASSWORD)
        page.get_by_role("button", name="Log in").click()
        page.wait_for_url(f"{base}/")
        state = login.storage_state()
        login.close()
        for size, (width, height) in SIZES.items():
            for scheme in SCHEMES:
                context = browser.new_context(
                    storage_state=state,
                    viewport={"width": width, "height": height},
                    device_scale_factor=1,
                    is_mobile=size == "phone",
                    has_touch=size == "phone",
                    color_scheme=scheme,
                    locale="en-US",
                    timezone_id="UTC",
                    reduced_motion="reduce",
                )
                page = context.new_page()
                page.goto(base + chat_path)
                expect(page.locator("section.chat[data-socket=open]")).to_be_visible()
                expect(page.locator("#messages math").first).to_be_visible()
                expect(page.locator("#messages .code-block").first).to_be_visible()
                # Scrolled to the end, as the page opens: the latest reply with its table.
                page.locator("#messages").evaluate("e => e.scrollTo(0, e.scrollHeight)")
                page.evaluate("() => document.activeElement && document.activeElement.blur()")
                path = out / f"chat-{size}-{scheme}.png"
                page.screenshot(path=str(path), animations="disabled", caret="hide")
                shrink(path)
                shots.append(path)
                if size == "desktop":
                    shots.append(photograph_search(page, out / f"search-{size}-{scheme}.png"))
                context.close()
        browser.close()
    return shots


def photograph_search(page: Any, path: Path) -> Path:
    """The sidebar's search as you type: the hits, their snippets with the words marked."""
    from playwright.sync_api import expect

    page.get_by_role("searchbox").fill("sorted list")
    expect(page.locator("#search-results mark").first).to_be_visible()
    page.evaluate("() => document.activeElement && document.activeElement.blur()")
    page.screenshot(path=str(path), animations="disabled", caret="hide")
    shrink(path)
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    args = parser.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("chromium is not installed (apt-get install chromium)")
    args.out.mkdir(parents=True, exist_ok=True)
    with (
        tempfile.TemporaryDirectory(prefix="chatsite-shots-") as tmp,
        live_server(Path(tmp)) as (
            base,
            chat_path,
        ),
    ):
        shots = photograph(base, chat_path, args.out, chromium)
    for path in shots:
        print(
            f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: {path.stat().st_size // 1024} KB"
        )
    too_big = [path for path in shots if path.stat().st_size > MAX_PNG_BYTES]
    return 1 if too_big else 0


if __name__ == "__main__":
    sys.exit(main())

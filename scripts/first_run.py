"""How long a newcomer waits: `make run` on a fresh clone, to the server and to the first token.

    python3 scripts/first_run.py                  # clones this repository's committed HEAD
    python3 scripts/first_run.py --cold           # with an empty pip cache (a first-ever install)
    python3 scripts/first_run.py --pip-cache DIR  # pip's cache in DIR: the second run is warm

It clones the repository into a temporary folder, starts `make run` there on a free port, waits
for the login page, logs in as the demo user (`manage.py demo_user`), opens a conversation's
socket as a browser would (the server's Origin, the JSON subprotocol), sends one message and
prints the seconds from the start to the clone, to the server's first page, to the first
streamed token and to the finished reply. The client half runs in the clone's own virtualenv
(`--client`), which has `websockets`; this half needs only the standard library.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
USERNAME = os.environ.get("DEMO_USERNAME", "demo")
PASSWORD = os.environ.get("DEMO_PASSWORD", "demo-password")
PROMPT = "Say hello in three words."


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def page_answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def measure(args: argparse.Namespace) -> int:
    work = Path(tempfile.mkdtemp(prefix="firstrun-"))
    clone = work / "chatsite"
    log = work / "make-run.log"
    port = args.port or free_port()
    env = dict(os.environ, PORT=str(port))
    if args.cold:
        env["PIP_CACHE_DIR"] = str(work / "pip-cache")  # empty: every package is downloaded
    elif args.pip_cache:
        env["PIP_CACHE_DIR"] = str(Path(args.pip_cache).resolve())
    started = time.time()
    load_at_start = os.getloadavg()[0]  # other work on the machine slows the install down
    marks: dict[str, float] = {}

    subprocess.run(["git", "clone", "-q", str(args.repo), str(clone)], check=True)
    marks["clone"] = time.time()
    with log.open("w") as out:
        # A session of its own: runserver's reloader child is stopped with it.
        server = subprocess.Popen(
            ["make", "run", f"PORT={port}"],
            cwd=clone,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        login = f"http://127.0.0.1:{port}/accounts/login/"
        deadline = started + args.timeout
        while not page_answers(login):
            if server.poll() is not None:
                print(f"make run exited with {server.returncode}; see {log}", file=sys.stderr)
                return 1
            if time.time() > deadline:
                print(f"no login page after {args.timeout} s; see {log}", file=sys.stderr)
                return 1
            time.sleep(0.5)
        marks["server_up"] = time.time()
        client = subprocess.run(
            [str(clone / ".venv/bin/python"), __file__, "--client", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=max(60.0, deadline - time.time()),
        )
        if client.returncode != 0:
            print(client.stdout + client.stderr, file=sys.stderr)
            return 1
        reply = json.loads(client.stdout.strip().splitlines()[-1])
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)

    marks["first_token"] = reply["first_token_at"]
    marks["finished"] = reply["finished_at"]
    result = {name: round(at - started, 1) for name, at in marks.items()}
    result |= {
        "reply_ttft_s": round(reply["first_token_at"] - reply["sent_at"], 2),
        "status": reply["status"],
        "text": reply["text"][:80],
        "pip_cache": "cold" if args.cold else (args.pip_cache or "default"),
        "load_1min_at_start_and_end": [load_at_start, os.getloadavg()[0]],
    }
    print(json.dumps(result))
    if args.keep:
        print(f"kept {work}", file=sys.stderr)
    else:
        subprocess.run(["rm", "-rf", str(work)], check=False)
    return 0 if reply["status"] == "complete" else 1


def client(port: int) -> None:
    """Runs in the clone's virtualenv: log in, start a conversation, send, time the reply."""
    import asyncio
    import http.cookiejar
    import urllib.parse
    import uuid

    from websockets.asyncio.client import connect

    base = f"http://127.0.0.1:{port}"
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))

    def cookie(name: str) -> str:
        return next(c.value for c in jar if c.name == name and c.value is not None)

    def post(path: str, fields: dict[str, str]) -> str:
        data = urllib.parse.urlencode(fields | {"csrfmiddlewaretoken": cookie("csrftoken")})
        request = urllib.request.Request(
            base + path, data=data.encode(), headers={"Referer": base + path, "Origin": base}
        )
        with opener.open(request, timeout=30) as response:
            return str(response.geturl())

    opener.open(base + "/accounts/login/", timeout=30).read()
    post("/accounts/login/", {"username": USERNAME, "password": PASSWORD})
    found = re.search(r"/conversations/([0-9a-f-]{36})/", post("/conversations/new/", {}))
    assert found, "no conversation after login: wrong demo password?"

    async def chat() -> dict[str, object]:
        async with connect(
            f"ws://127.0.0.1:{port}/ws/conversations/{found.group(1)}/",
            subprotocols=["chatsite.v1.json"],  # type: ignore[list-item]
            additional_headers={"Cookie": f"sessionid={cookie('sessionid')}", "Origin": base},
            open_timeout=60,
        ) as ws:
            sent_at = time.time()
            await ws.send(
                json.dumps(
                    {"action": "send", "content": PROMPT, "idempotency_key": uuid.uuid4().hex}
                )
            )
            first_token_at = None
            text = ""
            while True:
                event = json.loads(await asyncio.wait_for(ws.recv(), 300))
                if event["type"] == "message.delta":
                    first_token_at = first_token_at or time.time()
                    text += event["text"]
                elif event["type"] == "error":
                    raise RuntimeError(f"the server refused the send: {event}")
                elif event["type"] == "message.finished":
                    message = event["message"]
                    return {
                        "sent_at": sent_at,
                        "first_token_at": first_token_at or time.time(),
                        "finished_at": time.time(),
                        "status": message["status"],
                        "text": message["content"] or text,
                    }

    print(json.dumps(asyncio.run(chat())))


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument(
        "--repo", default=str(ROOT), help="what to clone (default: this repository)"
    )
    parser.add_argument("--port", type=int, default=0, help="default: a free port")
    cache = parser.add_mutually_exclusive_group()
    cache.add_argument("--cold", action="store_true", help="an empty pip cache")
    cache.add_argument("--pip-cache", help="the pip cache to use (default: pip's own)")
    parser.add_argument("--timeout", type=float, default=1800, help="give up after this many s")
    parser.add_argument("--keep", action="store_true", help="keep the clone and its log")
    parser.add_argument("--client", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        client(args.port)
        return 0
    return measure(args)


if __name__ == "__main__":
    sys.exit(main())

"""The host's side of scripts/image_smoke.sh, on the repository's own packages (httpx, psycopg).

    image_smoke_client.py free-port                  a free loopback port, for the server
    image_smoke_client.py ensure-database URL        create the PostgreSQL database if missing
    image_smoke_client.py wait ORIGIN SECONDS [PID]  until ORIGIN/healthz answers 200 (while PID runs)
    image_smoke_client.py stream ORIGIN TOKEN        a streamed reply through the gateway

Each prints one line saying what it found, and exits 1 with the reason when it fails.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from urllib.parse import urlsplit

import httpx
import psycopg
from psycopg import sql

MIN_CONTENT_CHUNKS = 3  # the scripted engine writes tens of tokens: a stream, not one piece


class SmokeFailure(Exception):
    pass


def free_port() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        print(probe.getsockname()[1])


def ensure_database(url: str) -> None:
    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    if not name:
        raise SmokeFailure(f"{url} names no database")
    server = parts._replace(path="/postgres").geturl()
    with psycopg.connect(server, autocommit=True) as connection:
        found = connection.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", [name]
        ).fetchone()
        if found is None:
            connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    print(f"database {name}: {'ready' if found else 'created'}")


def running(pid: int | None) -> bool:
    if pid is None:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait(origin: str, seconds: float, pid: int | None) -> None:
    deadline = time.monotonic() + seconds
    last = "no answer yet"
    while time.monotonic() < deadline:
        if not running(pid):
            raise SmokeFailure(
                f"the server (process {pid}) exited before {origin}/healthz answered"
            )
        try:
            response = httpx.get(f"{origin}/healthz", timeout=2)
            if response.status_code == 200:
                print(
                    f"{origin}/healthz: 200 after {seconds - (deadline - time.monotonic()):.1f} s"
                )
                return
            last = f"status {response.status_code}: {response.text[:200]}"
        except httpx.TransportError as exc:
            last = repr(exc)
        time.sleep(0.5)
    raise SmokeFailure(f"{origin}/healthz did not answer 200 within {seconds:.0f} s ({last})")


def stream(origin: str, token: str) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=origin, headers=headers, timeout=30) as client:
        models = client.get("/v1/models")
        if models.status_code != 200:
            raise SmokeFailure(f"GET /v1/models: {models.status_code} {models.text[:300]}")
        model = models.json()["data"][0]["id"]
        body = {
            "model": model,
            "stream": True,
            "messages": [{"role": "user", "content": "Say something, image."}],
        }
        with client.stream("POST", "/v1/chat/completions", json=body) as response:
            if response.status_code != 200:
                response.read()
                raise SmokeFailure(
                    f"POST /v1/chat/completions: {response.status_code} {response.text[:300]}"
                )
            content_type = response.headers.get("content-type", "")
            if not content_type.startswith("text/event-stream"):
                raise SmokeFailure(f"the stream came as {content_type!r}, not text/event-stream")
            events = [
                line[len("data: ") :] for line in response.iter_lines() if line.startswith("data: ")
            ]
    check_events(events, model)


def check_events(events: list[str], model: str) -> None:
    if not events or events[-1] != "[DONE]":
        raise SmokeFailure(f"the stream did not end with [DONE]: {events[-3:]}")
    chunks = [json.loads(event) for event in events[:-1]]
    pieces = [
        choice["delta"].get("content") or ""
        for chunk in chunks
        for choice in chunk.get("choices", [])
    ]
    text = "".join(pieces)
    content_chunks = sum(1 for piece in pieces if piece)
    if content_chunks < MIN_CONTENT_CHUNKS:
        raise SmokeFailure(
            f"{content_chunks} chunks held text, expected {MIN_CONTENT_CHUNKS} or more"
        )
    print(
        f"model {model}: {len(events)} SSE events, {content_chunks} with text ({len(text)} characters), then [DONE]"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("free-port")
    commands.add_parser("ensure-database").add_argument("url")
    waiting = commands.add_parser("wait")
    waiting.add_argument("origin")
    waiting.add_argument("seconds", type=float)
    waiting.add_argument("pid", type=int, nargs="?")
    streaming = commands.add_parser("stream")
    streaming.add_argument("origin")
    streaming.add_argument("token")
    args = parser.parse_args()
    try:
        if args.command == "free-port":
            free_port()
        elif args.command == "ensure-database":
            ensure_database(args.url)
        elif args.command == "wait":
            wait(args.origin, args.seconds, args.pid)
        else:
            stream(args.origin, args.token)
    except (SmokeFailure, httpx.HTTPError, psycopg.Error, KeyError, ValueError) as exc:
        print(f"image smoke: {args.command}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

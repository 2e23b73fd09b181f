#!/usr/bin/env python
"""Check the vllm engine end to end, on a machine with a GPU.

    pip install '.[vllm]'
    CHAT_VLLM_MODEL=Qwen/Qwen2.5-0.5B-Instruct python scripts/check_vllm.py

Runs chatsite's conversation socket, generation service and vllm engine in this one process
(a throwaway SQLite database and the in-memory channel layer): streams a short reply to the end,
then a long one, presses Stop after its first tokens, and prints the abort latency and vLLM's
own `vllm:num_requests_running` gauge (from its Prometheus metrics, in this process's registry)
before, during and after. It exits 0 when Stop reached vLLM: the reply is saved cancelled with
finish_reason "abort", and vLLM is running no request afterwards.

vLLM refreshes that gauge on engine steps; an idle engine may leave it at its last value, so
after the stop the script polls it for a few seconds and, if it still shows a request, sends
one more short reply (an engine step) and reads it again.

--stand-in runs the same steps against tests/support/fake_vllm.py instead (no GPU, no vllm
package; it checks this script, not vLLM).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
STORY = "Write a very long story about a lighthouse keeper and the sea, in many chapters."


def configure(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(ROOT))
    database = Path(tempfile.mkdtemp(prefix="check-vllm-")) / "db.sqlite3"
    os.environ.update(
        DJANGO_SETTINGS_MODULE="chatsite.settings",
        DEBUG="1",
        DATABASE_URL=f"sqlite:///{database}",
        CHAT_ENGINE="vllm",
    )
    os.environ.pop("REDIS_URL", None)  # one process: the in-memory channel layer
    if args.model:
        os.environ["CHAT_VLLM_MODEL"] = args.model
    if args.stand_in:
        os.environ.setdefault("CHAT_VLLM_MODEL", "stand-in/model")
    elif not os.environ.get("CHAT_VLLM_MODEL"):
        sys.exit("Set CHAT_VLLM_MODEL (e.g. Qwen/Qwen2.5-0.5B-Instruct) or pass --model.")

    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    if args.stand_in:
        from conversations.engines import vllm as backend
        from tests.support import fake_vllm

        stand_in = type("AsyncLLM", (fake_vllm.AsyncLLM,), {"reply_tokens": 10_000})
        backend.import_vllm = lambda: fake_vllm.api(stand_in)  # type: ignore[assignment]


def running_gauge() -> float | None:
    """vLLM's `vllm:num_requests_running`, summed over engines; None if vLLM exports none."""
    from prometheus_client import REGISTRY

    total = None
    for metric in REGISTRY.collect():
        for sample in metric.samples:
            if sample.name == "vllm:num_requests_running":
                total = (total or 0.0) + sample.value
    return total


def running_in_engine() -> int | None:
    """The requests vLLM's front end still tracks (not a metric; printed beside the gauge)."""
    from conversations.engines import get_engine

    llm = get_engine().llm()  # type: ignore[attr-defined]
    processor = getattr(llm, "output_processor", None)
    if processor is not None:
        return int(processor.get_num_unfinished_requests())
    return getattr(llm, "num_requests_running", None)


def show(label: str) -> float | None:
    gauge = running_gauge()
    print(
        f"  {label:<26} vllm:num_requests_running={_fmt(gauge)}"
        f"   (front end tracks {_fmt(running_in_engine())})"
    )
    return gauge


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:g}"


class Client:
    def __init__(self, communicator: Any):
        self.communicator = communicator

    async def send(self, **frame: Any) -> None:
        await self.communicator.send_to(text_data=json.dumps(frame))

    async def until(self, kind: str, timeout: float) -> list[dict[str, Any]]:
        events = []
        while True:
            event = json.loads(await self.communicator.receive_from(timeout=timeout))
            events.append(event)
            if event["type"] == kind:
                return events


async def check(args: argparse.Namespace) -> bool:
    from channels.db import database_sync_to_async
    from channels.routing import URLRouter
    from channels.testing import WebsocketCommunicator
    from django.conf import settings
    from django.contrib.auth import get_user_model

    from conversations.models import Conversation
    from conversations.sockets.renderers import JSON_SUBPROTOCOL
    from conversations.sockets.routing import websocket_urlpatterns

    def make_conversation() -> Any:
        user = get_user_model().objects.create_user("vllm-check", password="unused-password")
        return Conversation.objects.create(owner=user, title="vllm check")

    conversation = await database_sync_to_async(make_conversation)()
    communicator = WebsocketCommunicator(
        URLRouter(websocket_urlpatterns),
        f"/ws/conversations/{conversation.pk}/",
        subprotocols=[JSON_SUBPROTOCOL],
    )
    communicator.scope["user"] = conversation.owner
    connected, _ = await communicator.connect()
    assert connected, "the conversation socket refused us"
    client = Client(communicator)
    print(f"model {settings.CHAT_VLLM_MODEL}")

    print("1. a short reply, to the end (the first one also loads the model)")
    settings.CHAT_MAX_TOKENS = 32
    started = time.monotonic()
    await client.send(action="send", content="Say hello in five words.")
    reply = (await client.until("message.finished", args.load_timeout))[-1]["message"]
    print(
        f"  status={reply['status']} finish_reason={reply['finish_reason']} "
        f"tokens={reply['completion_tokens']} in {time.monotonic() - started:.1f}s "
        f"text={reply['content'][:60]!r}"
    )
    if reply["status"] != "complete":
        print(f"  error: {reply['error']}")
        return False
    before = show("before the long reply:")

    print(f"2. a long reply, Stop after {args.stop_after} deltas")
    settings.CHAT_MAX_TOKENS = args.max_tokens
    await client.send(action="send", content=STORY)
    for _ in range(args.stop_after):
        await client.until("message.delta", 60)
    during = show("while it streams:")
    pressed = time.monotonic()
    await client.send(action="cancel")
    reply = (await client.until("message.finished", 60))[-1]["message"]
    seen = (time.monotonic() - pressed) * 1000
    print(
        f"  status={reply['status']} finish_reason={reply['finish_reason']} "
        f"tokens={reply['completion_tokens']} of at most {args.max_tokens}"
    )
    print(
        f"  abort latency: {reply['cancel_latency_ms']:.1f} ms from the cancel request to vLLM's "
        f"confirmation (saved on the message); {seen:.1f} ms from pressing Stop to the "
        f"finished event on the socket"
    )

    print("3. after the stop")
    after = None
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        after = running_gauge()
        if after == 0:
            break
        await asyncio.sleep(0.2)
    after = show("after Stop (polled <=5s):")
    if after not in (0, None):
        settings.CHAT_MAX_TOKENS = 4
        await client.send(action="send", content="Say OK.")
        await client.until("message.finished", 60)
        after = show("after one more short reply:")
    await communicator.disconnect()

    stopped = reply["status"] == "cancelled" and reply["finish_reason"] == "abort"
    idle = after == 0 or (after is None and running_in_engine() == 0)
    print(
        f"verdict: stop {'reached' if stopped else 'did NOT reach'} vLLM; "
        f"running requests before/during/after: {_fmt(before)}/{_fmt(during)}/{_fmt(after)}"
    )
    return stopped and idle


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="overrides CHAT_VLLM_MODEL")
    parser.add_argument("--max-tokens", type=int, default=2048, help="the long reply's limit")
    parser.add_argument("--stop-after", type=int, default=5, help="deltas before Stop")
    parser.add_argument(
        "--load-timeout", type=float, default=900, help="seconds for the model to load"
    )
    parser.add_argument("--stand-in", action="store_true", help="use tests/support/fake_vllm.py")
    args = parser.parse_args()
    configure(args)
    from conversations.engines import close_engines

    try:
        passed = asyncio.run(check(args))
    finally:
        close_engines()  # vLLM's own processes would keep the script from exiting
    sys.exit(0 if passed else 1)


if __name__ == "__main__":
    main()

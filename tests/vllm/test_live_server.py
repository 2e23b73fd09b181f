"""A live daphne with CHAT_ENGINE=vllm, serving replies from the real vLLM over a real socket.

One server (and one model load) serves the module. Stop is checked at vLLM's side through the
server's /metrics, where vLLM's own gauges live in the process's Prometheus registry.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from channels.db import database_sync_to_async

from tests.support.replies import only_reply_of
from tests.support.servers import NEEDS_SHARED_SERVICES, ServerProcess, open_socket, session_cookie
from tests.support.sockets import LiveSocket, finished, is_delta, streamed_text
from tests.vllm import smollm2

pytestmark = [
    pytest.mark.processes,
    pytest.mark.django_db(transaction=True),
    NEEDS_SHARED_SERVICES,
    pytest.mark.timeout(600),
]

MAX_TOKENS = 400
STORY = "Write a very long story about a lighthouse keeper and the sea, in many chapters."


@pytest.fixture(scope="module")
def server(django_db_setup: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    overrides = {"CHAT_MAX_TOKENS": MAX_TOKENS, "CHAT_TEMPERATURE": 0}
    with smollm2.vllm_server(tmp_path_factory.mktemp("live"), **overrides) as live:
        smollm2.wait_until_loaded(live)
        yield live


async def test_a_reply_streams_from_vllm_to_the_tab(
    server: ServerProcess, alice: Any, conversation: Any
) -> None:
    cookie = await database_sync_to_async(session_cookie)(alice)
    async with open_socket(server, conversation.pk, cookie) as ws:
        tab = LiveSocket(ws)
        await tab.send(action="send", content="Say hello in one short sentence.")
        events = await tab.receive_until(finished, timeout=120)

    reply = events[-1]["message"]
    assert reply["status"] == "complete", reply
    assert len([e for e in events if is_delta(e)]) > 1, "streamed in pieces, not at once"
    assert streamed_text(events) == reply["content"] != ""
    row = await only_reply_of(conversation)
    assert row.engine == "vllm"
    assert row.finish_reason in ("stop", "length")
    assert 0 < row.completion_tokens <= MAX_TOKENS
    assert row.prompt_tokens and row.prompt_tokens > 10, "counted by the model's chat template"


async def test_stop_is_confirmed_by_vllm(
    server: ServerProcess, alice: Any, conversation: Any
) -> None:
    cookie = await database_sync_to_async(session_cookie)(alice)
    async with open_socket(server, conversation.pk, cookie) as ws:
        tab = LiveSocket(ws)
        await tab.send(action="send", content=STORY)
        await tab.receive_until(is_delta, timeout=120)
        running = await asyncio.to_thread(smollm2.running_requests, server)
        await tab.send(action="cancel")
        events = await tab.receive_until(finished, timeout=60)

    assert running == 1, "vLLM was running the reply when Stop was pressed"
    reply = events[-1]["message"]
    assert reply["status"] == "cancelled", reply
    row = await only_reply_of(conversation)
    assert row.finish_reason == "abort", "vLLM ended the request because of the abort"
    assert row.completion_tokens < MAX_TOKENS
    assert row.cancelled_by == "alice" and row.cancel_latency_ms is not None
    # The engine core reports the drop with the step after the abort.
    async with asyncio.timeout(10):
        while await asyncio.to_thread(smollm2.running_requests, server) != 0:  # noqa: ASYNC110
            await asyncio.sleep(0.1)

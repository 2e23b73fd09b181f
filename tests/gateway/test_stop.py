"""Stopping an API call's reply: its client closing the stream, and a chat tab's Stop button.
Both go through the generation lifecycle: the engine confirms the stop, the row records who."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import openai
import pytest
from channels.db import database_sync_to_async

from conversations.models import Conversation, Message
from tests.gateway.conftest import Gateway, eventually, request_id_of
from tests.support.launch import ASGI_SERVERS
from tests.support.llama_server import LlamaServer
from tests.support.replies import full_reply, wait_until_settled
from tests.support.servers import NEEDS_SHARED_SERVICES, open_socket, session_cookie
from tests.support.sockets import LiveSocket, finished, streamed_text

pytestmark = [
    pytest.mark.processes,
    pytest.mark.django_db(transaction=True),
    NEEDS_SHARED_SERVICES,
]

LONG = 2000  # tokens: a reply that runs for 40 s unless something stops it


async def conversation_of(conversation_id: str) -> Conversation:
    return await database_sync_to_async(Conversation.objects.get)(pk=conversation_id)


@pytest.mark.parametrize("asgi_server", ASGI_SERVERS)
async def test_closing_the_stream_stops_the_engine(
    gateway: Callable[..., Gateway], alice_key: str, asgi_server: str
) -> None:
    server = gateway(server=asgi_server, CHAT_SCRIPTED_TOKENS=LONG)
    raw = await server.client(alice_key).chat.completions.with_raw_response.create(
        model="default", messages=[{"role": "user", "content": "Go on"}], stream=True
    )
    stream = raw.parse()
    chunks = [await anext(stream) for _ in range(4)]  # the role, then three pieces of text
    await stream.close()

    row = await wait_until_settled(await conversation_of(raw.headers["x-chatsite-conversation"]))
    assert row.status == Message.Status.CANCELLED
    assert row.cancelled_by == "client_disconnect"
    assert row.cancel_latency_ms is not None and row.cancel_confirmed_at is not None
    assert row.finish_reason == "abort"
    assert 3 <= row.completion_tokens < LONG
    # Saved: what the response had sent the client when it left (at least what it read), none
    # of what the engine wrote after that (issue 23, finding 16).
    assert row.content.startswith("".join(c.choices[0].delta.content or "" for c in chunks))
    assert full_reply(row.completion_tokens).startswith(row.content)
    # From the engine's side: told to stop, it ended, and wrote at most a token after that.
    record = await server.engine_record(request_id_of(chunks[0].id))
    assert record["stop_requested_at"] is not None and record["finished"]
    assert record["emitted"] == row.completion_tokens < LONG
    assert record["emitted_after_stop"] <= 1


async def test_a_client_gone_before_the_first_token_stops_the_reply(
    gateway: Callable[..., Gateway], alice: Any, alice_key: str
) -> None:
    # The model takes a while to load: the call waits for it, and its client gives up first.
    server = gateway(
        CHAT_MODELS='[{"slug": "slow", "backend": "scripted", "options": {"load_s": 30}}]'
    )
    stream = await server.client(alice_key, timeout=1.0).chat.completions.create(
        model="slow", messages=[{"role": "user", "content": "Hello?"}], stream=True
    )
    with pytest.raises(openai.APITimeoutError):
        async for _ in stream:
            pass
    conversation = await database_sync_to_async(Conversation.objects.get)(owner=alice)
    row = await wait_until_settled(conversation)
    assert row.status == Message.Status.CANCELLED and row.cancelled_by == "client_disconnect"
    assert row.content == "" and row.first_token_at is None


async def test_a_chat_tab_sees_the_call_stream_and_its_stop_ends_it(
    gateway: Callable[..., Gateway], alice: Any, alice_key: str
) -> None:
    server = gateway(CHAT_SCRIPTED_TOKENS=LONG)
    raw = await server.client(alice_key).chat.completions.with_raw_response.create(
        model="default", messages=[{"role": "user", "content": "Go on"}], stream=True
    )
    stream = raw.parse()
    first = await anext(stream)
    conversation_id = raw.headers["x-chatsite-conversation"]
    cookie = await database_sync_to_async(session_cookie)(alice)
    async with open_socket(server.server, conversation_id, cookie) as ws:
        tab = LiveSocket(ws)
        # Joined mid-reply: the text so far, then the rest as it streams.
        seen = await tab.receive_until(lambda e: e["type"] == "message.delta")
        await tab.send(action="cancel")
        seen += await tab.receive_until(finished)
    rest = [chunk async for chunk in stream]

    assert seen[0]["type"] == "message.snapshot"
    saved = seen[-1]["message"]
    assert saved["status"] == "cancelled" and saved["cancelled_by"] == "alice"
    # What the tab and the call were sent, none of what the engine wrote after the Stop (issue
    # 23, finding 16).
    assert streamed_text(seen) == saved["content"]
    assert full_reply(saved["completion_tokens"]).startswith(saved["content"])
    call_text = "".join(c.choices[0].delta.content or "" for c in [first, *rest] if c.choices)
    assert call_text == saved["content"]
    # The call heard the end: its last chunk ends it with OpenAI's "stop" (clients raise on a
    # reason they do not know) and says in chatsite's own field that it was stopped.
    last = rest[-1].choices[0]
    assert (last.finish_reason, last.model_extra) == (
        "stop",
        {"chatsite_finish_reason": "cancelled"},
    )
    row = await wait_until_settled(await conversation_of(conversation_id))
    assert row.cancelled_by == "alice" and row.cancel_latency_ms is not None
    record = await server.engine_record(row.request_id)
    assert record["stop_requested_at"] is not None and record["emitted"] < LONG


@pytest.mark.timeout(300)
async def test_closing_the_stream_reaches_a_real_openai_compatible_server(
    gateway: Callable[..., Gateway], alice_key: str, llama_server: LlamaServer
) -> None:
    # chatsite's openai engine against llama.cpp's server: the gateway's client closes its
    # stream, and the upstream server sees its own client (chatsite) go away.
    llama = llama_server
    before = llama.disconnects()
    server = gateway(
        CHAT_ENGINE="openai",
        CHAT_OPENAI_BASE_URL=llama.base_url,
        CHAT_MAX_TOKENS=400,
        CHAT_SYSTEM_PROMPT="",
    )
    raw = await server.client(alice_key).chat.completions.with_raw_response.create(
        model="default",
        messages=[{"role": "user", "content": "Count from one to two hundred in words."}],
        stream=True,
        # Passed on to the server by the openai engine, which accepts them.
        temperature=0.0,
        top_p=0.9,
        seed=1,
        stop=["<never written>"],
    )
    stream = raw.parse()
    for _ in range(4):
        await anext(stream)
    await stream.close()

    row = await wait_until_settled(await conversation_of(raw.headers["x-chatsite-conversation"]))
    assert row.status == Message.Status.CANCELLED
    assert row.cancelled_by == "client_disconnect" and row.cancel_latency_ms is not None
    assert row.engine == "openai" and row.completion_tokens < 400

    async def upstream_saw_its_client_go() -> bool:
        return llama.disconnects() > before

    assert await eventually(upstream_saw_its_client_go)

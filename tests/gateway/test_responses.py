"""/v1/responses, OpenAI's Responses API for plain text, through the real openai SDK against a live
daphne: whole and streamed, each object and event held to the SDK's generated types; the call
recorded and sent to the engine as a chat completion's is; what it does not serve refused by
name."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import openai
import pytest
from channels.db import database_sync_to_async
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from conversations.models import Conversation, Message
from tests.gateway.conftest import BOUND_S, Gateway
from tests.support.replies import full_reply
from tests.support.servers import NEEDS_SHARED_SERVICES, open_socket, session_cookie
from tests.support.sockets import LiveSocket, finished

pytestmark = [
    pytest.mark.processes,
    pytest.mark.django_db(transaction=True),
    NEEDS_SHARED_SERVICES,
]

EVENTS = TypeAdapter(ResponseStreamEvent)


def request_id_of(response_id: str) -> str:
    return response_id.removeprefix("resp_")


def messages_of(conversation_id: str) -> list[tuple[str, str]]:
    rows = Message.objects.filter(conversation_id=conversation_id).order_by("id")
    return [(m.role, m.content) for m in rows]


async def test_a_whole_response_with_instructions_recorded(
    gateway: Callable[..., Gateway], alice: Any, alice_key: str
) -> None:
    server = gateway(CHAT_SCRIPTED_TOKENS=6)
    raw = await server.client(alice_key).responses.with_raw_response.create(
        model="default", input="Hello", instructions="Be brief."
    )
    response = raw.parse()

    Response.model_validate(json.loads(raw.content))  # every field the SDK's type asks for
    assert response.object == "response" and response.status == "completed"
    assert response.output_text == full_reply(6) and response.model == "default"
    assert response.usage is not None and response.usage.output_tokens == 6
    assert response.instructions == "Be brief."
    record = await server.engine_record(request_id_of(response.id))
    assert record["messages"] == [["system", "Be brief."], ["user", "Hello"]]
    conversation_id = raw.headers["x-chatsite-conversation"]
    assert raw.headers["x-request-id"] == request_id_of(response.id)
    conversation = await database_sync_to_async(Conversation.objects.get)(pk=conversation_id)
    assert conversation.owner_id == alice.pk and conversation.origin == Conversation.Origin.API
    assert await database_sync_to_async(messages_of)(conversation_id) == [
        ("user", "Hello"),
        ("assistant", full_reply(6)),
    ]


async def test_a_streamed_response_in_the_events_the_sdk_reads(
    gateway: Callable[..., Gateway], alice_key: str
) -> None:
    server = gateway(CHAT_SCRIPTED_TOKENS=8)
    body = {"model": "default", "input": "Hello", "stream": True}
    headers = {"Authorization": f"Bearer {alice_key}"}
    async with (
        httpx.AsyncClient(base_url=server.origin, timeout=BOUND_S) as http,
        http.stream("POST", "/v1/responses", json=body, headers=headers) as answer,
    ):
        lines = [line async for line in answer.aiter_lines()]
    data = [json.loads(line[6:]) for line in lines if line.startswith("data: ")]
    named = [line[7:] for line in lines if line.startswith("event: ")]

    events = [EVENTS.validate_python(item) for item in data]  # each one as the SDK types it
    kinds = [event.type for event in events]
    assert named == kinds
    assert kinds[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert kinds[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    deltas = [event.delta for event in events if event.type == "response.output_text.delta"]
    assert "".join(deltas) == full_reply(8)
    assert [event.sequence_number for event in events] == list(range(len(events)))
    completed = events[-1]
    assert completed.type == "response.completed"
    assert completed.response.output_text == full_reply(8)

    # And the SDK's own stream reader, which builds the text from the same events.
    stream = await server.client(alice_key).responses.create(
        model="default", input="Again", stream=True
    )
    texts = [event.delta async for event in stream if event.type == "response.output_text.delta"]
    assert "".join(texts) == full_reply(8)


async def test_a_conversation_in_input_and_the_length_cut(
    gateway: Callable[..., Gateway], alice_key: str
) -> None:
    server = gateway(CHAT_SCRIPTED_TOKENS=40)
    response = await server.client(alice_key).responses.create(
        model="default",
        input=[
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": [{"type": "output_text", "text": "Bonjour"}]},
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "And?"}],
            },
        ],
        max_output_tokens=5,
    )

    assert response.status == "incomplete" and response.output_text == full_reply(5)
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "max_output_tokens"
    record = await server.engine_record(request_id_of(response.id))
    # After the model's own system prompt (no instructions were sent).
    assert record["messages"][1:] == [["user", "Hi"], ["assistant", "Bonjour"], ["user", "And?"]]


REFUSED: list[tuple[dict[str, Any], str, str]] = [
    ({"input": "Hi", "tools": [{"type": "web_search"}]}, "tools", "unsupported_parameter"),
    (
        {"input": "Hi", "previous_response_id": "resp_1"},
        "previous_response_id",
        "unsupported_parameter",
    ),
    ({"input": "Hi", "reasoning": {"effort": "high"}}, "reasoning", "unsupported_parameter"),
    (
        {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
        "input[0].content[0]",
        "unsupported_content",
    ),
    (
        {"input": [{"type": "function_call_output", "output": "1"}]},
        "input[0]",
        "unsupported_content",
    ),
    ({"input": "   "}, "input", "invalid_value"),
    ({"input": "Hi", "max_output_tokens": 0}, "max_output_tokens", "invalid_value"),
]


async def test_what_it_does_not_serve_is_refused_by_name(
    gateway: Callable[..., Gateway], alice: Any, alice_key: str
) -> None:
    server = gateway()
    for arguments, param, code in REFUSED:
        with pytest.raises(openai.BadRequestError) as refused:
            await server.client(alice_key).responses.create(model="default", **arguments)
        error = refused.value.response.json()["error"]
        assert (error["param"], error["code"]) == (param, code), arguments
    assert not await database_sync_to_async(Conversation.objects.filter(owner=alice).exists)()


async def test_a_tab_stop_ends_a_streamed_response_as_incomplete(
    gateway: Callable[..., Gateway], alice: Any, alice_key: str
) -> None:
    server = gateway(CHAT_SCRIPTED_TOKENS=2000)
    raw = await server.client(alice_key).responses.with_raw_response.create(
        model="default", input="Go on", stream=True
    )
    stream = raw.parse()
    events = [await anext(stream) for _ in range(5)]  # up to the first text delta
    assert events[-1].type == "response.output_text.delta"
    cookie = await database_sync_to_async(session_cookie)(alice)
    async with open_socket(server.server, raw.headers["x-chatsite-conversation"], cookie) as ws:
        tab = LiveSocket(ws)
        await tab.receive_until(lambda e: e["type"] == "message.delta")
        await tab.send(action="cancel")
        seen = await tab.receive_until(finished)
    events += [event async for event in stream]

    last = events[-1]
    assert last.type == "response.incomplete"
    assert last.response.status == "incomplete"
    assert last.response.model_extra == {"chatsite_finish_reason": "cancelled"}
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == last.response.output_text == seen[-1]["message"]["content"]

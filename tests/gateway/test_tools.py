"""Tool calling through /v1/chat/completions with the real openai SDK against a live daphne: a
model with `tools` (the scripted engine, which calls a tool when given one) returns its calls in
OpenAI's shape, streamed and whole; the caller's result goes back to it; every step is recorded
in the conversation and shown in its page. A model without tools answers in text, or refuses a
call that insists on a tool."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import openai
import pytest
from channels.db import database_sync_to_async
from django.test import Client
from django.urls import reverse

from conversations.models import Message
from tests.gateway.conftest import Gateway, request_id_of
from tests.support.servers import NEEDS_SHARED_SERVICES

pytestmark = [
    pytest.mark.processes,
    pytest.mark.django_db(transaction=True),
    NEEDS_SHARED_SERVICES,
]

MODELS = json.dumps(
    [
        {"slug": "agent", "name": "Agent", "backend": "scripted", "tools": True},
        {"slug": "plain", "name": "Plain", "backend": "scripted", "options": {"tokens": 4}},
    ]
)
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city now.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
    },
}
CLOCK = {"type": "function", "function": {"name": "get_time"}}
QUESTION = {"role": "user", "content": "Weather in Paris?"}
RESULT = "Sunny and 21 degrees"


def called_and_answered(call_id: str, arguments: str | None) -> list[dict[str, Any]]:
    """The assistant's call of get_weather and the tool's RESULT, as a caller sends them back."""
    call = {"name": "get_weather", "arguments": arguments or ""}
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": call_id, "type": "function", "function": call}],
        },
        {"role": "tool", "tool_call_id": call_id, "content": RESULT},
    ]


def rows_of(conversation_id: str) -> list[Message]:
    return list(Message.objects.filter(conversation_id=conversation_id).order_by("id"))


def page_of(
    conversation_id: str, owner: Any, name: str = "conversation-detail", **query: str
) -> str:
    client = Client()
    client.force_login(owner)
    return client.get(reverse(name, args=[conversation_id]), query).content.decode()


async def test_a_tool_call_and_its_result_whole_recorded_and_shown(
    gateway: Callable[..., Gateway], alice: Any, alice_key: str
) -> None:
    server = gateway(CHAT_MODELS=MODELS)
    client = server.client(alice_key)
    raw = await client.chat.completions.with_raw_response.create(
        model="agent",
        messages=[QUESTION],
        tools=[CLOCK, WEATHER],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
    )
    called = raw.parse()
    conversation_id = raw.headers["x-chatsite-conversation"]

    (choice,) = called.choices
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    (call,) = choice.message.tool_calls or []
    assert (call.type, call.function.name) == ("function", "get_weather")
    assert json.loads(call.function.arguments) == {"query": "Weather in Paris?"}
    record = await server.engine_record(request_id_of(called.id), model="agent")
    assert [tool["function"]["name"] for tool in record["params"]["tools"]] == [
        "get_time",
        "get_weather",
    ]

    # The caller runs the tool and sends its result back, with the whole history, in the
    # conversation the first call made.
    answered = await client.chat.completions.create(
        model="agent",
        messages=[
            QUESTION,
            choice.message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": RESULT},
        ],
        tools=[CLOCK, WEATHER],
        extra_headers={"X-Chatsite-Conversation": conversation_id},
    )
    assert answered.choices[0].finish_reason == "stop"
    assert answered.choices[0].message.content == RESULT + " "
    assert not answered.choices[0].message.tool_calls
    # The engine was given the call and its result as such.
    record = await server.engine_record(request_id_of(answered.id), model="agent")
    assert record["tool_turns"] == [
        {"role": "assistant", "content": "", "tool_calls": [call.model_dump()]},
        {"role": "tool", "content": RESULT, "tool_call_id": call.id},
    ]

    question, asked, result, reply = await database_sync_to_async(rows_of)(conversation_id)
    assert (question.role, question.content) == ("user", "Weather in Paris?")
    assert asked.parent_id == question.pk and asked.finish_reason == "tool_calls"
    assert asked.tool_calls == [call.model_dump()] and asked.content == ""
    assert (result.role, result.parent_id, result.tool_call_id) == ("tool", asked.pk, call.id)
    assert result.content == RESULT
    assert reply.parent_id == result.pk and reply.content == RESULT + " "

    page = await database_sync_to_async(page_of)(conversation_id, alice)
    assert "Called <code>get_weather</code>" in page
    assert "Tool result" in page and RESULT in page
    markdown = await database_sync_to_async(page_of)(
        conversation_id, alice, "api-conversation-export", format="markdown"
    )
    assert f"- Tool: called get_weather ({call.id}) with {call.function.arguments}" in markdown
    assert f"- Tool: result of tool call {call.id}" in markdown


async def test_a_tool_call_streamed_and_a_new_conversation_from_the_whole_history(
    gateway: Callable[..., Gateway], alice_key: str
) -> None:
    server = gateway(CHAT_MODELS=MODELS)
    client = server.client(alice_key)
    stream = await client.chat.completions.create(
        model="agent", messages=[QUESTION], tools=[WEATHER], stream=True
    )
    chunks = [chunk async for chunk in stream]

    first, *middle, last = chunks
    assert first.choices[0].delta.role == "assistant"
    assert last.choices[0].finish_reason == "tool_calls"
    pieces = [piece for c in middle for piece in c.choices[0].delta.tool_calls or []]
    (piece,) = pieces
    assert piece.index == 0 and piece.type == "function" and piece.id
    assert piece.function is not None and piece.function.name == "get_weather"
    assert json.loads(piece.function.arguments or "") == {"query": "Weather in Paris?"}

    # Sent as an agent framework sends it: the whole history, no conversation header.
    stream = await client.chat.completions.create(
        model="agent",
        messages=[
            QUESTION,
            *called_and_answered(piece.id, piece.function.arguments),
        ],
        tools=[WEATHER],
        stream=True,
    )
    text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text == RESULT + " "


async def test_a_model_without_tools_answers_in_text_or_refuses_a_required_call(
    gateway: Callable[..., Gateway], alice: Any, alice_key: str
) -> None:
    server = gateway(CHAT_MODELS=MODELS)
    client = server.client(alice_key)
    for choice in (None, "auto", "none"):
        options: dict[str, Any] = {"tool_choice": choice} if choice else {}
        answered = await client.chat.completions.create(
            model="plain", messages=[QUESTION], tools=[WEATHER], **options
        )
        assert answered.choices[0].finish_reason == "stop"
        assert answered.choices[0].message.content and not answered.choices[0].message.tool_calls
        record = await server.engine_record(request_id_of(answered.id), model="plain")
        assert record["params"]["tools"] == []  # not passed on: its engine cannot use them

    count = await database_sync_to_async(Message.objects.filter(conversation__owner=alice).count)()
    for insisting in ("required", {"type": "function", "function": {"name": "get_weather"}}):
        with pytest.raises(openai.BadRequestError) as refused:
            await client.chat.completions.create(
                model="plain", messages=[QUESTION], tools=[WEATHER], tool_choice=insisting
            )
        error = refused.value.response.json()["error"]
        assert (error["code"], error["param"]) == ("tools_not_supported", "tool_choice")
        assert "cannot call tools" in error["message"]
    # Refused before anything was saved.
    after = await database_sync_to_async(Message.objects.filter(conversation__owner=alice).count)()
    assert after == count


async def test_a_tool_result_must_answer_a_call_it_follows(
    gateway: Callable[..., Gateway], alice_key: str
) -> None:
    server = gateway(CHAT_MODELS=MODELS)
    asked = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    }
    for messages in (
        [QUESTION, asked, {"role": "tool", "tool_call_id": "call_2", "content": "x"}],
        [
            QUESTION,
            asked,
            {"role": "tool", "tool_call_id": "call_1", "content": "x"},
            {"role": "tool", "tool_call_id": "call_1", "content": "y"},
        ],
        [QUESTION, {"role": "tool", "tool_call_id": "call_1", "content": "x"}],
    ):
        with pytest.raises(openai.BadRequestError) as refused:
            await server.client(alice_key).chat.completions.create(
                model="agent", messages=messages, tools=[WEATHER]
            )
        assert refused.value.response.json()["error"]["param"] == f"messages[{len(messages) - 1}]"


@pytest.mark.model
async def test_a_real_tool_calling_server_behind_the_gateway(
    gateway: Callable[..., Gateway], alice_key: str, tool_calling_llama_server: Any
) -> None:
    """The openai backend in front of llama.cpp's server (its function-calling handler): the
    model's call reaches the SDK, its result goes back, and the model answers in text."""
    city = {"type": "string", "enum": ["Paris", "Rome"]}
    weather = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": city}, "required": ["city"]},
        },
    }
    served = {
        "slug": "served",
        "backend": "openai",
        "tools": True,
        "max_tokens": 24,
        "temperature": 0.0,
        "options": {"base_url": tool_calling_llama_server.base_url, "timeout": 60},
    }
    server = gateway(CHAT_MODELS=json.dumps([served]))
    client = server.client(alice_key, timeout=60)
    named = {"type": "function", "function": {"name": "get_weather"}}
    stream = await client.chat.completions.create(
        model="served", messages=[QUESTION], tools=[weather], tool_choice=named, stream=True
    )
    chunks = [chunk async for chunk in stream]

    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    (piece,) = [p for c in chunks if c.choices for p in c.choices[0].delta.tool_calls or []]
    assert piece.function is not None and piece.function.name == "get_weather"
    assert json.loads(piece.function.arguments or "")["city"] in ("Paris", "Rome")

    answered = await client.chat.completions.create(
        model="served",
        messages=[
            QUESTION,
            *called_and_answered(piece.id, piece.function.arguments),
        ],
        tools=[weather],
        tool_choice="none",
    )
    assert answered.choices[0].finish_reason in ("stop", "length")
    assert answered.choices[0].message.content and not answered.choices[0].message.tool_calls

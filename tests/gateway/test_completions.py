"""/v1/chat/completions through the real openai SDK against a live daphne: streamed and whole
replies, usage, what reaches the engine, and how each call is recorded."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from channels.db import database_sync_to_async

from conversations.engines.scripted import scripted_token
from conversations.models import Conversation, Message
from tests.gateway.conftest import Gateway, request_id_of
from tests.support.replies import full_reply
from tests.support.servers import NEEDS_SHARED_SERVICES

pytestmark = [
    pytest.mark.processes,
    pytest.mark.django_db(transaction=True),
    NEEDS_SHARED_SERVICES,
]

HELLO = [{"role": "user", "content": "Hello"}]


def messages_of(conversation_id: str) -> list[Message]:
    return list(
        Message.objects.filter(conversation_id=conversation_id).order_by("created_at", "id")
    )


async def test_it_streams_a_reply_with_usage(
    gateway: Callable[..., Gateway], alice_key: str
) -> None:
    server = gateway(CHAT_SCRIPTED_TOKENS=12)
    raw = await server.client(alice_key).chat.completions.with_raw_response.create(
        model="default", messages=HELLO, stream=True, stream_options={"include_usage": True}
    )
    chunks = [chunk async for chunk in raw.parse()]

    assert raw.headers["content-type"].startswith("text/event-stream")
    assert raw.headers["cache-control"] == "no-cache"
    assert raw.headers["x-accel-buffering"] == "no"
    first, *texts, last, usage = chunks
    assert first.choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in texts) == full_reply(12)
    assert all(c.choices[0].finish_reason is None for c in (first, *texts))
    assert last.choices[0].finish_reason == "stop" and not last.choices[0].delta.content
    assert usage.choices == [] and usage.usage is not None
    assert usage.usage.completion_tokens == 12
    assert usage.usage.total_tokens == usage.usage.prompt_tokens + 12
    assert {c.id for c in chunks} == {first.id} and first.model == "default"

    conversation_id = raw.headers["x-chatsite-conversation"]
    conversation = await database_sync_to_async(Conversation.objects.get)(pk=conversation_id)
    assert conversation.origin == Conversation.Origin.API
    assert conversation.origin_detail.startswith("AsyncOpenAI/Python")
    assert conversation.title == "Hello"
    question, reply = await database_sync_to_async(messages_of)(conversation_id)
    assert (question.role, question.content) == ("user", "Hello")
    assert reply.parent_id == question.pk and reply.status == Message.Status.COMPLETE
    assert reply.content == full_reply(12) and reply.completion_tokens == 12
    assert reply.request_id == request_id_of(first.id) and reply.finish_reason == "stop"
    assert reply.ttft_ms is not None and reply.tokens_per_second is not None
    assert reply.cancelled_by == "" and reply.cancel_latency_ms is None


async def test_it_answers_whole_with_usage_and_the_length_cut(
    gateway: Callable[..., Gateway], alice_key: str
) -> None:
    server = gateway(CHAT_SCRIPTED_TOKENS=40)
    completion = await server.client(alice_key).chat.completions.create(
        model="default", messages=HELLO, max_completion_tokens=5
    )

    (choice,) = completion.choices
    assert choice.message.role == "assistant" and choice.message.content == full_reply(5)
    assert choice.finish_reason == "length"
    assert completion.object == "chat.completion" and completion.model == "default"
    assert completion.usage is not None and completion.usage.completion_tokens == 5
    assert completion.usage.prompt_tokens > 0


async def test_the_system_prompt_history_and_sampling_reach_the_engine_and_the_record(
    gateway: Callable[..., Gateway], alice_key: str
) -> None:
    server = gateway(CHAT_SCRIPTED_TOKENS=40)
    raw = await server.client(alice_key).chat.completions.with_raw_response.create(
        model="default",
        messages=[
            {"role": "system", "content": "Answer in French."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": [{"type": "text", "text": "Bonjour"}]},
            {"role": "user", "content": "How are you?"},
        ],
        temperature=0.3,
        top_p=0.5,
        seed=7,
        max_tokens=30,
        stop=[scripted_token(3).strip()],
    )
    completion = raw.parse()

    # Cut before the stop sequence, as a server does; the model ended it, so "stop".
    assert completion.choices[0].message.content == full_reply(3)
    assert completion.choices[0].finish_reason == "stop"
    record = await server.engine_record(request_id_of(completion.id))
    assert record["messages"] == [
        ["system", "Answer in French."],
        ["user", "Hi"],
        ["assistant", "Bonjour"],
        ["user", "How are you?"],
    ]
    params = record["params"]
    assert (params["temperature"], params["top_p"], params["seed"]) == (0.3, 0.5, 7)
    assert (params["max_tokens"], params["stop"]) == (30, [scripted_token(3).strip()])

    conversation_id = raw.headers["x-chatsite-conversation"]
    rows = await database_sync_to_async(messages_of)(conversation_id)
    assert [(m.role, m.content) for m in rows[:3]] == [
        ("user", "Hi"),
        ("assistant", "Bonjour"),
        ("user", "How are you?"),
    ]
    assert [m.parent_id for m in rows] == [None, rows[0].pk, rows[1].pk, rows[2].pk]
    reply = rows[3]
    assert (reply.system_prompt, reply.temperature, reply.max_tokens) == (
        "Answer in French.",
        0.3,
        30,
    )
    conversation = await database_sync_to_async(Conversation.objects.get)(pk=conversation_id)
    assert conversation.title == "Hi" and conversation.system_prompt == "Answer in French."
    assert conversation.current_leaf_id == reply.pk


async def test_sampling_is_kept_within_the_models_bounds(
    gateway: Callable[..., Gateway], alice_key: str
) -> None:
    # The default model allows up to 2.0 and CHAT_MAX_TOKENS 8 caps max_tokens_limit at 4096.
    server = gateway(CHAT_SCRIPTED_TOKENS=3, CHAT_MAX_TOKENS=8)
    completion = await server.client(alice_key).chat.completions.create(
        model="default", messages=HELLO, max_tokens=100_000
    )
    record = await server.engine_record(request_id_of(completion.id))
    assert record["params"]["max_tokens"] == 4096
    assert record["params"]["temperature"] == 0.7  # the model's default, none asked for


async def test_a_reply_watched_only_by_its_call_outlives_the_grace_period(
    gateway: Callable[..., Gateway], alice_key: str
) -> None:
    # No tab ever watches an API call: the call itself counts as its viewer.
    server = gateway(
        CHAT_SCRIPTED_TOKENS=30, CHAT_DISCONNECT_GRACE_S=0.2, CHAT_FLUSH_INTERVAL_S=0.1
    )
    completion = await server.client(alice_key).chat.completions.create(
        model="default", messages=HELLO
    )
    assert completion.choices[0].finish_reason == "stop"
    assert completion.choices[0].message.content == full_reply(30)

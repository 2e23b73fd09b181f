"""Refusals reach the SDK as its own exception types, with OpenAI-style error objects; failures of
the engine before and after the first chunk; a stranger and a bad token are refused."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import httpx
import openai
import pytest
from channels.db import database_sync_to_async
from django.utils import timezone

from conversations.models import Conversation
from tests.gateway.conftest import Gateway
from tests.support.replies import full_reply, wait_until_settled
from tests.support.servers import NEEDS_SHARED_SERVICES, session_cookie

pytestmark = [
    pytest.mark.processes,
    pytest.mark.django_db(transaction=True),
    NEEDS_SHARED_SERVICES,
]

HELLO = [{"role": "user", "content": "Hello"}]
# Replies of the "flaky" model fail after three tokens, of "broken" before the first.
FAILING_MODELS = json.dumps(
    [
        {"slug": "flaky", "backend": "scripted", "options": {"tokens": 10, "fail_after": 3}},
        {"slug": "broken", "backend": "scripted", "options": {"fail_after": 0}},
    ]
)


def error_of(exc: openai.APIStatusError) -> dict[str, Any]:
    body = exc.response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    error: dict[str, Any] = body["error"]
    return error


async def test_a_bad_token_is_refused_with_a_challenge(
    gateway: Callable[..., Gateway], alice: Any, alice_key: str
) -> None:
    server = gateway()
    for key in ("cs_not-a-token", alice_key + "x"):
        with pytest.raises(openai.AuthenticationError) as refused:
            await server.client(key).chat.completions.create(model="default", messages=HELLO)
        assert refused.value.status_code == 401
        assert refused.value.response.headers["www-authenticate"] == 'Bearer realm="api"'
        assert error_of(refused.value)["code"] == "invalid_api_key"
    # Without a token: a signed-in browser's session cookie is no credential here.
    cookie = await database_sync_to_async(session_cookie)(alice)
    async with httpx.AsyncClient(base_url=server.origin, headers={"Cookie": cookie}) as http:
        response = await http.get("/v1/models")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "invalid_api_key"


async def test_an_unknown_model_is_not_found(
    gateway: Callable[..., Gateway], alice: Any, alice_key: str
) -> None:
    server = gateway()
    with pytest.raises(openai.NotFoundError) as refused:
        await server.client(alice_key).chat.completions.create(model="gpt-9", messages=HELLO)
    error = error_of(refused.value)
    assert (error["code"], error["param"]) == ("model_not_found", "model")
    # Nothing was saved for it.
    assert not await database_sync_to_async(Conversation.objects.filter(owner=alice).exists)()


BAD_PARAMETERS: list[tuple[dict[str, Any], str]] = [
    ({"temperature": 3}, "temperature"),
    ({"top_p": -0.1}, "top_p"),
    ({"n": 2}, "n"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"stop": ["a", "b", "c", "d", "e"]}, "stop"),
    ({"logprobs": True}, "logprobs"),
    ({"response_format": {"type": "json_object"}}, "response_format"),
    # A tool's result answers a call: not one of nothing.
    ({"messages": [{"role": "tool", "content": "42", "tool_call_id": "t"}]}, "messages[0]"),
    ({"messages": [{"role": "function", "content": "42"}]}, "messages[0].role"),
    (
        {"tools": [{"type": "function", "function": {"name": "no spaces"}}]},
        "tools[0].function.name",
    ),
    ({"tool_choice": "required"}, "tool_choice"),  # with no tools to choose from
    ({"functions": [{"name": "f"}]}, "functions"),
    ({"messages": [{"role": "assistant", "content": "Hi"}]}, "messages[0].role"),
    (
        {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]},
        "messages[0].content[0].image_url.url",
    ),
    (
        {"messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}]},
        "messages[0].content[0].type",
    ),
    ({"stream_options": {"include_usage": True}}, "stream_options"),
]


async def test_a_bad_parameter_is_named(
    gateway: Callable[..., Gateway], alice: Any, alice_key: str
) -> None:
    server = gateway()
    for arguments, param in BAD_PARAMETERS:
        call = {"model": "default", "messages": HELLO, **arguments}
        with pytest.raises(openai.BadRequestError) as refused:
            await server.client(alice_key).chat.completions.create(**call)
        error = error_of(refused.value)
        assert (error["type"], error["param"]) == ("invalid_request_error", param), arguments
    assert not await database_sync_to_async(Conversation.objects.filter(owner=alice).exists)()


async def test_the_chat_pages_limits_apply_with_retry_after(
    gateway: Callable[..., Gateway], alice: Any, alice_key: str
) -> None:
    server = gateway(CHAT_SENDS_PER_MINUTE=2, CHAT_SCRIPTED_TOKENS=2)
    client = server.client(alice_key)
    for _ in range(2):
        await client.chat.completions.create(model="default", messages=HELLO)
    with pytest.raises(openai.RateLimitError) as refused:
        await client.chat.completions.create(model="default", messages=HELLO)
    assert 1 <= int(refused.value.response.headers["retry-after"]) <= 60
    error = error_of(refused.value)
    assert (error["type"], error["code"]) == ("requests", "rate_limit_exceeded")
    # The refused call left nothing behind: two conversations, not three.
    count = database_sync_to_async(Conversation.objects.filter(owner=alice).count)
    assert await count() == 2


async def test_the_gateway_refuses_a_used_budget_with_429_and_retry_after(
    gateway: Callable[..., Gateway], alice: Any, alice_key: str
) -> None:
    server = gateway(CHAT_TOKENS_PER_DAY=1, CHAT_SCRIPTED_TOKENS=2)
    client = server.client(alice_key)
    await client.chat.completions.create(model="default", messages=HELLO)
    with pytest.raises(openai.RateLimitError) as refused:
        await client.chat.completions.create(model="default", messages=HELLO)
    body = refused.value.response.json()["error"]
    assert (body["type"], body["code"]) == ("tokens", "budget_exhausted")
    now = timezone.localtime()  # chatsite's TIME_ZONE, as the server's
    midnight = (now + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    wait = int(refused.value.response.headers["retry-after"])
    assert abs(wait - (midnight - now).total_seconds()) < 120
    assert "resets on" in body["message"]


async def test_each_call_counts_as_a_new_conversation(
    gateway: Callable[..., Gateway], alice_key: str
) -> None:
    server = gateway(CHAT_CONVERSATIONS_PER_MINUTE=1, CHAT_SCRIPTED_TOKENS=2)
    client = server.client(alice_key)
    await client.chat.completions.create(model="default", messages=HELLO)
    with pytest.raises(openai.RateLimitError) as refused:
        await client.chat.completions.create(model="default", messages=HELLO)
    assert error_of(refused.value)["code"] == "too_many_conversations"


async def test_finding_17_calls_refused_as_too_many_active_spend_no_conversation_budget(
    gateway: Callable[..., Gateway], alice: Any, alice_key: str
) -> None:
    server = gateway(
        CHAT_MAX_ACTIVE_PER_USER=3, CHAT_CONVERSATIONS_PER_MINUTE=10, CHAT_SCRIPTED_TOKENS=2000
    )
    client = server.client(alice_key)
    streams = []
    for _ in range(3):
        raw = await client.chat.completions.with_raw_response.create(
            model="default", messages=HELLO, stream=True
        )
        stream = raw.parse()
        await anext(stream)
        streams.append((raw.headers["x-chatsite-conversation"], stream))
    # More refused calls than the minute's conversations left: each is refused for what it is.
    for _ in range(8):
        with pytest.raises(openai.RateLimitError) as refused:
            await client.chat.completions.create(model="default", messages=HELLO)
        assert error_of(refused.value)["code"] == "too_many_active"
    count = database_sync_to_async(Conversation.objects.filter(owner=alice).count)
    assert await count() == 3
    for conversation_id, stream in streams:
        await stream.close()
        conversation = await database_sync_to_async(Conversation.objects.get)(pk=conversation_id)
        await wait_until_settled(conversation)

    # Three conversations of the minute's ten: the next call is accepted.
    stream = await client.chat.completions.create(model="default", messages=HELLO, stream=True)
    await anext(stream)
    await stream.close()
    assert await count() == 4


async def test_a_failure_after_the_first_chunk_ends_the_stream_with_an_error_event(
    gateway: Callable[..., Gateway], alice_key: str
) -> None:
    server = gateway(CHAT_MODELS=FAILING_MODELS)
    stream = await server.client(alice_key).chat.completions.create(
        model="flaky", messages=HELLO, stream=True
    )
    received = []
    with pytest.raises(openai.APIError) as failed:
        async for chunk in stream:
            received.append(chunk)
    assert not isinstance(failed.value, openai.APIStatusError), "the status was 200"
    assert failed.value.message == "The scripted engine failed on purpose."
    assert failed.value.body == {
        "message": "The scripted engine failed on purpose.",
        "type": "server_error",
        "param": None,
        "code": "engine_error",
    }
    assert "".join(c.choices[0].delta.content or "" for c in received) == full_reply(3)


async def test_the_raw_stream_ends_at_the_error_event(
    gateway: Callable[..., Gateway], alice_key: str
) -> None:
    server = gateway(CHAT_MODELS=FAILING_MODELS)
    body = {"model": "flaky", "messages": HELLO, "stream": True}
    headers = {"Authorization": f"Bearer {alice_key}"}
    async with httpx.AsyncClient(base_url=server.origin) as http:
        response = await http.post("/v1/chat/completions", json=body, headers=headers)
    events = [line for line in response.text.split("\n\n") if line]
    assert response.status_code == 200
    assert json.loads(events[-1].removeprefix("data: "))["error"]["code"] == "engine_error"
    assert "data: [DONE]" not in events


async def test_a_failure_before_any_text_is_an_http_error_or_the_streams_error_event(
    gateway: Callable[..., Gateway], alice_key: str
) -> None:
    server = gateway(CHAT_MODELS=FAILING_MODELS)
    client = server.client(alice_key)
    with pytest.raises(openai.InternalServerError) as failed:
        await client.chat.completions.create(model="broken", messages=HELLO)
    assert error_of(failed.value)["code"] == "engine_error"
    # A stream's headers and first chunk went out as the send was saved: the error is an event.
    stream = await client.chat.completions.create(model="broken", messages=HELLO, stream=True)
    received = []
    with pytest.raises(openai.APIError) as streamed:
        async for chunk in stream:
            received.append(chunk)
    assert [c.choices[0].delta.role for c in received] == ["assistant"]
    assert streamed.value.body["code"] == "engine_error"  # type: ignore[index]


async def test_another_users_conversation_cannot_be_continued(
    gateway: Callable[..., Gateway], alice: Any, alice_key: str, charlie_key: str
) -> None:
    server = gateway(CHAT_SCRIPTED_TOKENS=2)
    raw = await server.client(alice_key).chat.completions.with_raw_response.create(
        model="default", messages=HELLO
    )
    alices = raw.headers["x-chatsite-conversation"]
    for conversation in (alices, "00000000-0000-0000-0000-000000000000"):
        with pytest.raises(openai.NotFoundError) as refused:
            await server.client(charlie_key).chat.completions.create(
                model="default",
                messages=HELLO,
                extra_headers={"X-Chatsite-Conversation": conversation},
            )
        assert error_of(refused.value)["code"] == "conversation_not_found"
    with pytest.raises(openai.BadRequestError):
        await server.client(alice_key).chat.completions.create(
            model="default", messages=HELLO, extra_headers={"X-Chatsite-Conversation": "nope"}
        )
    count = database_sync_to_async(lambda: Conversation.objects.get(pk=alices).messages.count())
    assert await count() == 2, "alice's conversation is untouched"


async def test_a_call_while_the_conversations_reply_is_written_is_a_conflict(
    gateway: Callable[..., Gateway], alice_key: str
) -> None:
    server = gateway(CHAT_SCRIPTED_TOKENS=2000)
    client = server.client(alice_key)
    raw = await client.chat.completions.with_raw_response.create(
        model="default", messages=HELLO, stream=True
    )
    stream = raw.parse()
    await anext(stream)
    with pytest.raises(openai.ConflictError) as refused:
        await client.chat.completions.create(
            model="default",
            messages=HELLO,
            extra_headers={"X-Chatsite-Conversation": raw.headers["x-chatsite-conversation"]},
        )
    assert error_of(refused.value)["code"] == "reply_in_progress"
    await stream.close()


async def test_only_its_endpoints_are_served(
    gateway: Callable[..., Gateway], alice_key: str
) -> None:
    server = gateway()
    headers = {"Authorization": f"Bearer {alice_key}"}
    async with httpx.AsyncClient(base_url=server.origin, headers=headers) as http:
        unknown = await http.post("/v1/embeddings", json={})
        wrong_method = await http.get("/v1/chat/completions")
        not_json = await http.post("/v1/chat/completions", content=b"{")
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "unknown_url"
    assert wrong_method.status_code == 405 and wrong_method.headers["allow"] == "POST"
    assert not_json.status_code == 400 and not_json.json()["error"]["code"] == "invalid_json"

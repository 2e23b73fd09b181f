"""What any OpenAI client may rely on, against a live daphne: CORS for /v1 from an allow-list, an
x-request-id on every response, a code on every refusal, unsupported fields refused by name and
harmless ones taken, engine failures as 502/503 with Retry-After, and a clear 404 for a
stored response (the Responses API itself: test_responses.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import openai
import pytest

from tests.gateway.conftest import BOUND_S, Gateway, request_id_of
from tests.gateway.test_refusals import BAD_PARAMETERS, FAILING_MODELS
from tests.support.servers import NEEDS_SHARED_SERVICES

pytestmark = [
    pytest.mark.processes,
    pytest.mark.django_db(transaction=True),
    NEEDS_SHARED_SERVICES,
]

HELLO = [{"role": "user", "content": "Hello"}]
ALLOWED = "https://chat.example.com"
PREFLIGHT = {
    "Access-Control-Request-Method": "POST",
    "Access-Control-Request-Headers": "authorization, content-type, x-chatsite-conversation",
}


def raw_client(server: Gateway, key: str | None = None, **headers: str) -> httpx.AsyncClient:
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    return httpx.AsyncClient(base_url=server.origin, headers=headers, timeout=BOUND_S)


async def test_it_answers_a_preflight_from_an_allowed_origin_only(
    gateway: Callable[..., Gateway], alice_key: str
) -> None:
    server = gateway(
        CHAT_GATEWAY_CORS_ORIGINS=f"{ALLOWED}, http://localhost:3000", CHAT_SCRIPTED_TOKENS=2
    )
    async with raw_client(server) as http:
        allowed = await http.options(
            "/v1/chat/completions", headers={"Origin": ALLOWED, **PREFLIGHT}
        )
        other = await http.options(
            "/v1/chat/completions", headers={"Origin": "https://evil.example", **PREFLIGHT}
        )
        # The page's call itself, after its preflight: readable by the page, headers included.
        call = await http.post(
            "/v1/chat/completions",
            json={"model": "default", "messages": HELLO},
            headers={"Origin": ALLOWED, "Authorization": f"Bearer {alice_key}"},
        )
        # No other route answers another origin, not even an allowed one.
        api = await http.options("/api/conversations/", headers={"Origin": ALLOWED, **PREFLIGHT})

    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == ALLOWED
    allowed_headers = allowed.headers["access-control-allow-headers"].split(", ")
    assert {"authorization", "content-type", "x-chatsite-conversation"} <= set(allowed_headers)
    assert "POST" in allowed.headers["access-control-allow-methods"]
    assert "access-control-allow-credentials" not in allowed.headers  # tokens, never cookies
    assert "access-control-allow-origin" not in other.headers
    assert call.status_code == 200 and call.headers["access-control-allow-origin"] == ALLOWED
    exposed = call.headers["access-control-expose-headers"].lower().split(", ")
    assert set(exposed) == {"x-chatsite-conversation", "x-request-id"}
    assert "access-control-allow-origin" not in api.headers


async def test_no_origin_is_allowed_by_default(
    gateway: Callable[..., Gateway], alice_key: str
) -> None:
    server = gateway()
    async with raw_client(server) as http:
        preflight = await http.options(
            "/v1/chat/completions", headers={"Origin": ALLOWED, **PREFLIGHT}
        )
    assert "access-control-allow-origin" not in preflight.headers


async def test_every_response_has_a_request_id_and_the_log_has_it(
    gateway: Callable[..., Gateway], alice_key: str
) -> None:
    server = gateway(CHAT_SCRIPTED_TOKENS=3, CHAT_GATEWAY_CORS_ORIGINS=ALLOWED)
    client = server.client(alice_key)
    whole = await client.chat.completions.with_raw_response.create(
        model="default", messages=HELLO, extra_headers={"X-Request-Id": "client-1"}
    )
    streamed = await client.chat.completions.with_raw_response.create(
        model="default", messages=HELLO, stream=True
    )
    chunks = [chunk async for chunk in streamed.parse()]
    async with raw_client(server, alice_key) as http:
        refused = await http.post(
            "/v1/chat/completions",
            json={"model": "default", "messages": []},
            headers={"X-Request-Id": "my-call-42"},
        )
        not_found = await http.get("/v1/embeddings", headers={"X-Request-Id": "a b\tc"})
        too_long = await http.get("/v1/models/nope", headers={"X-Request-Id": "x" * 129})
        models = await http.get("/v1/models")
        preflight = await http.options(
            "/v1/chat/completions", headers={"Origin": ALLOWED, **PREFLIGHT}
        )

    # A call with a reply goes by the reply's id: its completion's, its log lines'.
    assert whole.headers["x-request-id"] == request_id_of(whole.parse().id)
    assert streamed.headers["x-request-id"] == request_id_of(chunks[0].id)
    # Without one, the client's own, if it is short and printable; else a fresh one.
    assert refused.status_code == 400 and refused.headers["x-request-id"] == "my-call-42"
    assert not_found.status_code == 404
    for response in (not_found, too_long, models, preflight):
        made = response.headers["x-request-id"]
        assert 1 <= len(made) <= 128 and made.isprintable() and " " not in made
    assert too_long.headers["x-request-id"] != "x" * 129
    ids = {r.headers["x-request-id"] for r in (not_found, too_long, models, preflight)}
    assert len(ids) == 4, "one id per request"
    log = server.server.log.read_text()
    assert "refused request_id=my-call-42 POST /v1/chat/completions status=400" in log
    assert f"refused request_id={not_found.headers['x-request-id']} GET /v1/embeddings" in log
    reply_id = whole.headers["x-request-id"]
    assert f"call request_id={reply_id} client_request_id=client-1" in log
    assert f"send accepted request_id={reply_id}" in log


# Each a body that is refused, beside the bad parameters test_refusals names.
REFUSED_BODIES: list[dict[str, Any]] = [
    {"messages": HELLO},
    {"model": "default"},
    {"model": "default", "messages": "Hello"},
    {"model": "x" * 300, "messages": HELLO},
    {"model": "default", "messages": [{"role": "user", "content": ""}]},
    {"model": "default", "messages": [{"role": "user", "content": 7}]},
    {"model": "default", "messages": [{"role": "user", "content": "x"}] * 1001},
    {"model": "default", "messages": HELLO, "stream": "yes"},
    {"model": "default", "messages": HELLO, "seed": 1.5},
    {"model": "default", "messages": HELLO, "stop": 4},
    {"model": "default", "messages": HELLO, "tools": [{"type": "function"}]},
    {"model": "default", "messages": HELLO, "frequency_penalty": 1},
    {"model": "default", "messages": HELLO, "logit_bias": {"1": 2}},
    {"model": "default", "messages": HELLO, "modalities": ["audio"]},
    {"model": "default", "messages": HELLO, "prediction": {"type": "content"}},
    {"model": "default", "messages": HELLO, "reasoning_effort": "high"},
    {"model": "default", "messages": HELLO, "verbosity": "low"},
    {"model": "default", "messages": HELLO, "web_search_options": {}},
    {
        "model": "default",
        "messages": [{"role": "user", "content": [{"type": "file", "file": {"file_id": "f"}}]}],
    },
    {
        "model": "default",
        "messages": [
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x"}}]}
        ],
    },
    {"model": "gpt-9", "messages": HELLO},
]


async def test_every_refusal_has_a_code(gateway: Callable[..., Gateway], alice_key: str) -> None:
    server = gateway()
    bodies = [*REFUSED_BODIES]
    bodies += [{"model": "default", "messages": HELLO, **args} for args, _ in BAD_PARAMETERS]
    async with raw_client(server, alice_key) as http:
        responses = [await http.post("/v1/chat/completions", json=body) for body in bodies]
        responses += [
            await http.post("/v1/chat/completions", content=b"{"),
            await http.post("/v1/chat/completions", content=b"[]"),
            await http.get("/v1/chat/completions"),
            await http.post("/v1/embeddings", json={}),
            await http.get("/v1/models/gpt-9"),
            await http.post(
                "/v1/chat/completions",
                json={"model": "default", "messages": HELLO},
                headers={"X-Chatsite-Conversation": "nope"},
            ),
        ]
    async with raw_client(server, "cs_not-a-token") as http:
        responses.append(await http.get("/v1/models"))

    for response in responses:
        assert 400 <= response.status_code < 500, response.request.content
        error = response.json()["error"]
        assert isinstance(error["code"], str) and error["code"], response.request.content
        assert error["code"] == error["code"].lower() and " " not in error["code"]


@pytest.mark.parametrize(
    ("field", "value"),
    [("reasoning_effort", "low"), ("verbosity", "high"), ("web_search_options", {})],
)
async def test_a_field_that_would_change_the_reply_is_refused_by_name(
    gateway: Callable[..., Gateway], alice_key: str, field: str, value: Any
) -> None:
    server = gateway()
    with pytest.raises(openai.BadRequestError) as refused:
        await server.client(alice_key).chat.completions.create(
            model="default", messages=HELLO, extra_body={field: value}
        )
    error = refused.value.response.json()["error"]
    assert (error["param"], error["code"]) == (field, "unsupported_parameter")


async def test_harmless_fields_are_accepted(
    gateway: Callable[..., Gateway], alice_key: str
) -> None:
    server = gateway(CHAT_SCRIPTED_TOKENS=2)
    client = server.client(alice_key)
    harmless: dict[str, Any] = {
        "user": "user-1234",
        "metadata": {"project": "tests"},
        "store": False,
        "service_tier": "auto",
        "parallel_tool_calls": False,
        "reasoning_effort": None,
    }
    whole = await client.chat.completions.create(
        model="default", messages=HELLO, extra_body=harmless
    )
    stream = await client.chat.completions.create(
        model="default",
        messages=HELLO,
        stream=True,
        stream_options={"include_usage": True, "include_obfuscation": False},  # type: ignore[typeddict-unknown-key]
        extra_body=harmless,
    )
    chunks = [chunk async for chunk in stream]
    assert whole.choices[0].finish_reason == "stop"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 2


async def test_an_engine_failure_is_a_502_with_retry_after(
    gateway: Callable[..., Gateway], alice_key: str
) -> None:
    server = gateway(CHAT_MODELS=FAILING_MODELS)
    with pytest.raises(openai.InternalServerError) as failed:
        await server.client(alice_key).chat.completions.create(model="broken", messages=HELLO)
    response = failed.value.response
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "engine_error"
    assert int(response.headers["retry-after"]) >= 1
    # The SDK waits as it is told, then tries again, and tells the server which try it is.
    retried = server.client(alice_key, max_retries=1)
    with pytest.raises(openai.InternalServerError) as again:
        await retried.chat.completions.create(model="broken", messages=HELLO)
    assert again.value.response.request.headers["x-stainless-retry-count"] == "1"


async def test_an_unavailable_engine_is_a_503_with_retry_after(
    gateway: Callable[..., Gateway], alice: Any, alice_key: str
) -> None:
    # Its model file is not there: the engine cannot be built, and the send is refused.
    models = [{"slug": "gone", "backend": "llamacpp", "model": "/nonexistent/model.gguf"}]
    server = gateway(CHAT_MODELS=json.dumps(models))
    with pytest.raises(openai.InternalServerError) as failed:
        await server.client(alice_key).chat.completions.create(model="gone", messages=HELLO)
    response = failed.value.response
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "engine_unavailable"
    assert int(response.headers["retry-after"]) >= 1


async def test_a_stored_response_is_not_found_naming_what_to_do(
    gateway: Callable[..., Gateway], alice_key: str
) -> None:
    server = gateway()
    with pytest.raises(openai.NotFoundError) as refused:
        await server.client(alice_key).responses.retrieve("resp_123")
    error = refused.value.response.json()["error"]
    assert error["code"] == "unknown_url"
    assert "POST /v1/responses" in error["message"]

"""The official openai Node SDK (tests/support/openai_node, at its lockfile's version) against the
live gateway, each case streamed and whole. The SDK hands over the JSON objects the server wrote
as they are, so they are what the schema check reads."""

from __future__ import annotations

from typing import Any

import pytest

from tests.gateway.conformance.conftest import (
    GO_ON,
    HELLO,
    REFUSALS,
    SHORT,
    Caller,
    assert_engine_stopped,
    conversation_being_written,
    stop_from_tab,
)
from tests.gateway.conformance.openai_schema import assert_chunk, assert_completion
from tests.gateway.conftest import Gateway
from tests.support.node_sdk import NEEDS_NODE, node_call, node_result
from tests.support.replies import full_reply
from tests.support.servers import NEEDS_SHARED_SERVICES

pytestmark = [
    pytest.mark.processes,
    pytest.mark.django_db,  # reads only: the caller and the server's rows are committed
    NEEDS_SHARED_SERVICES,
    NEEDS_NODE,
]

STREAMED = pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
EXCEPTIONS = {400: "BadRequestError", 401: "AuthenticationError", 404: "NotFoundError"}


def base_url(server: Gateway) -> str:
    return f"{server.origin}/v1"


def answer_of(chunks: list[dict[str, Any]], result: dict[str, Any]) -> tuple[str, Any, Any]:
    """The text, finish reason and usage of a call's output, once each object was checked."""
    assert "error" not in result, result
    if "completion" in result:
        completion = result["completion"]
        assert_completion(completion)
        (choice,) = completion["choices"]
        return choice["message"]["content"], choice["finish_reason"], completion.get("usage")
    for chunk in chunks:
        assert_chunk(chunk)
    with_choices = [chunk["choices"][0] for chunk in chunks if chunk["choices"]]
    text = "".join(choice["delta"].get("content") or "" for choice in with_choices)
    return text, with_choices[-1]["finish_reason"], chunks[-1].get("usage")


async def answer(server: Gateway, key: str, stream: bool, **body: Any) -> tuple[str, Any, Any]:
    call = {"model": "default", "messages": HELLO, "stream": stream, **body}
    return answer_of(*await node_result(base_url(server), key, call))


@STREAMED
async def test_it_answers_a_plain_reply(conformance: Gateway, caller: Caller, stream: bool) -> None:
    text, finish, _ = await answer(conformance, caller.key, stream)
    assert (text, finish) == (full_reply(SHORT), "stop")


@STREAMED
async def test_it_counts_the_usage(conformance: Gateway, caller: Caller, stream: bool) -> None:
    options = {"stream_options": {"include_usage": True}} if stream else {}
    _, _, usage = await answer(conformance, caller.key, stream, **options)
    assert usage["completion_tokens"] == SHORT and usage["prompt_tokens"] > 0
    assert usage["total_tokens"] == usage["prompt_tokens"] + SHORT


@STREAMED
async def test_max_tokens_ends_the_reply_with_length(
    conformance: Gateway, caller: Caller, stream: bool
) -> None:
    text, finish, _ = await answer(conformance, caller.key, stream, max_tokens=3)
    assert (text, finish) == (full_reply(3), "length")


@STREAMED
@pytest.mark.parametrize("case", REFUSALS)
async def test_a_refusal_is_the_sdks_own_exception(
    conformance: Gateway, caller: Caller, stream: bool, case: str
) -> None:
    changes, status, code, param = REFUSALS[case]
    call = {"model": "default", "messages": HELLO, "stream": stream, **changes}
    chunks, result = await node_result(base_url(conformance), caller.key_for(case), call)
    error = result["error"]
    assert chunks == [] and error["is_api_error"]
    assert (error["class"], error["status"]) == (EXCEPTIONS[status], status)
    assert (error["code"], error["param"]) == (code, param)


async def test_closing_the_stream_stops_the_engine(conformance: Gateway, caller: Caller) -> None:
    call = {"model": "long", "messages": GO_ON, "stream": True}
    async with node_call(base_url(conformance), caller.key, call, close_after=4) as node:
        conversation_id = (await node.headers())["x-chatsite-conversation"]
        result = await node.result()
    assert result == {"event": "result", "closed": True} and len(node.chunks) == 4
    for chunk in node.chunks:
        assert_chunk(chunk)
    row = await assert_engine_stopped(conformance, conversation_id)
    assert row.cancelled_by == "client_disconnect"


@STREAMED
async def test_a_reply_stopped_from_a_tab_ends_with_stop(
    conformance: Gateway, caller: Caller, stream: bool
) -> None:
    call = {"model": "long", "messages": GO_ON, "stream": stream}
    async with node_call(base_url(conformance), caller.key, call) as node:
        if stream:
            await node.first_chunk()
            conversation_id: Any = (await node.headers())["x-chatsite-conversation"]
        else:
            conversation_id = (await conversation_being_written(caller.user)).pk
        await stop_from_tab(conformance, caller, conversation_id)
        result = await node.result()

    text, finish, _ = answer_of(node.chunks, result)
    wire = (result["completion"] if "completion" in result else node.chunks[-1])["choices"][0]
    row = await assert_engine_stopped(conformance, conversation_id)
    assert row.cancelled_by == caller.user.username and text == row.content
    assert finish == "stop" and wire["chatsite_finish_reason"] == "cancelled"

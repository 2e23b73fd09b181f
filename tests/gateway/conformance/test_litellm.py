"""litellm against the live gateway as an OpenAI-compatible server (`openai/<model>` and
`api_base`), each case streamed and whole: what litellm makes of chatsite's answers (it checks
finish reasons and errors its own way). The wire itself is held to the schema by the SDKs' tests.

litellm is told to use its own copy of the price list (conftest.py): nothing is fetched.
"""

from __future__ import annotations

import asyncio
from typing import Any

import litellm
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
from tests.gateway.conftest import Gateway
from tests.support.replies import full_reply
from tests.support.servers import NEEDS_SHARED_SERVICES

pytestmark = [
    pytest.mark.processes,
    pytest.mark.django_db,  # reads only: the caller and the server's rows are committed
    NEEDS_SHARED_SERVICES,
    # litellm's own use of pydantic, at each streamed usage.
    pytest.mark.filterwarnings(
        "ignore:Accessing the 'model_(computed_)?fields' attribute:DeprecationWarning"
    ),
]

litellm.suppress_debug_info = True  # its "Give Feedback / Get Help" on each refusal
STREAMED = pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
EXCEPTIONS = {
    400: litellm.exceptions.BadRequestError,
    401: litellm.exceptions.AuthenticationError,
    404: litellm.exceptions.NotFoundError,
}


async def call(server: Gateway, key: str, stream: bool, **body: Any) -> Any:
    """litellm's answer: a ModelResponse, or (streamed) its stream wrapper."""
    arguments = {"model": "default", "messages": HELLO, **body}
    arguments["model"] = f"openai/{arguments['model']}"
    return await litellm.acompletion(
        **arguments,
        api_base=f"{server.origin}/v1",
        api_key=key,
        stream=stream,
        max_retries=0,  # a retried call would be a second call
        timeout=20,
    )


async def answer(server: Gateway, key: str, stream: bool, **body: Any) -> tuple[str, Any, Any]:
    """The reply's text, finish reason and usage as litellm gives them."""
    response = await call(server, key, stream, **body)
    if not stream:
        (choice,) = response.choices
        return choice.message.content, choice.finish_reason, response.usage
    chunks = [chunk async for chunk in response]
    return read_stream(chunks)


def read_stream(chunks: list[Any]) -> tuple[str, Any, Any]:
    with_choices = [chunk.choices[0] for chunk in chunks if chunk.choices]
    text = "".join(choice.delta.content or "" for choice in with_choices)
    finishes = [choice.finish_reason for choice in with_choices if choice.finish_reason]
    usages = [usage for chunk in chunks if (usage := getattr(chunk, "usage", None))]
    return text, finishes[-1] if finishes else None, usages[-1] if usages else None


@STREAMED
async def test_it_answers_a_plain_reply(conformance: Gateway, caller: Caller, stream: bool) -> None:
    text, finish, _ = await answer(conformance, caller.key, stream)
    assert (text, finish) == (full_reply(SHORT), "stop")


@STREAMED
async def test_it_counts_the_usage(conformance: Gateway, caller: Caller, stream: bool) -> None:
    options = {"stream_options": {"include_usage": True}} if stream else {}
    _, _, usage = await answer(conformance, caller.key, stream, **options)
    assert usage is not None and usage.completion_tokens == SHORT
    assert usage.prompt_tokens > 0 and usage.total_tokens == usage.prompt_tokens + SHORT


@STREAMED
async def test_max_tokens_ends_the_reply_with_length(
    conformance: Gateway, caller: Caller, stream: bool
) -> None:
    text, finish, _ = await answer(conformance, caller.key, stream, max_tokens=3)
    assert (text, finish) == (full_reply(3), "length")


@STREAMED
@pytest.mark.parametrize("case", REFUSALS)
async def test_a_refusal_is_litellms_own_exception(
    conformance: Gateway, caller: Caller, stream: bool, case: str
) -> None:
    changes, status, code, param = REFUSALS[case]
    with pytest.raises(EXCEPTIONS[status]) as refused:
        await answer(conformance, caller.key_for(case), stream, **changes)
    assert refused.value.status_code == status
    # litellm keeps the body's error as its `body` for a 400 only; the response it keeps always.
    error = refused.value.response.json()["error"]
    assert (error["code"], error["param"]) == (code, param)


async def test_closing_the_stream_stops_the_engine(conformance: Gateway, caller: Caller) -> None:
    stream = await call(conformance, caller.key, True, model="long", messages=GO_ON)
    for _ in range(4):
        await anext(stream)
    conversation = await conversation_being_written(caller.user)
    await stream.aclose()
    row = await assert_engine_stopped(conformance, conversation.pk)
    assert row.cancelled_by == "client_disconnect"


@STREAMED
async def test_a_reply_stopped_from_a_tab_ends_without_an_error(
    conformance: Gateway, caller: Caller, stream: bool
) -> None:
    # litellm raised InternalServerError / MidStreamFallbackError on finish_reason "abort".
    if stream:
        chunks = await call(conformance, caller.key, True, model="long", messages=GO_ON)
        first = await anext(chunks)
        conversation_id = (await conversation_being_written(caller.user)).pk
        await stop_from_tab(conformance, caller, conversation_id)
        text, finish, _ = read_stream([first, *[chunk async for chunk in chunks]])
    else:
        answered = asyncio.ensure_future(
            answer(conformance, caller.key, False, model="long", messages=GO_ON)
        )
        conversation_id = (await conversation_being_written(caller.user)).pk
        await stop_from_tab(conformance, caller, conversation_id)
        text, finish, _ = await answered

    row = await assert_engine_stopped(conformance, conversation_id)
    assert row.cancelled_by == caller.user.username and text == row.content
    assert finish == "stop"

"""The openai Python SDK against the live gateway, each case streamed and whole: what the SDK hands
the application, and every object the server wrote held to OpenAI's schema."""

from __future__ import annotations

import asyncio
from typing import Any

import openai
import pytest
from openai import AsyncOpenAI

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
from tests.gateway.conformance.wiretap import WireTap
from tests.gateway.conftest import Gateway
from tests.support.replies import full_reply
from tests.support.servers import NEEDS_SHARED_SERVICES

pytestmark = [
    pytest.mark.processes,
    pytest.mark.django_db,  # reads only: the caller and the server's rows are committed
    NEEDS_SHARED_SERVICES,
]

STREAMED = pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
EXCEPTIONS = {
    400: openai.BadRequestError,
    401: openai.AuthenticationError,
    404: openai.NotFoundError,
}


class Python:
    """The SDK as an application uses it, and a tap on what it was sent."""

    def __init__(self, server: Gateway, key: str) -> None:
        self.tap = WireTap()
        self.sdk: AsyncOpenAI = server.client(key, http_client=self.tap.client())

    async def answer(self, stream: bool, **body: Any) -> tuple[str, str | None, Any]:
        """The reply's text, its finish reason and usage as the SDK gives them, once every object
        on the wire was checked against the schema."""
        call = {"model": "default", "messages": HELLO, **body}
        if not stream:
            completion = await self.sdk.chat.completions.create(**call)
            assert_completion(self.tap.last_json())
            (choice,) = completion.choices
            return choice.message.content or "", choice.finish_reason, completion.usage
        chunks = [
            chunk async for chunk in await self.sdk.chat.completions.create(**call, stream=True)
        ]
        self.assert_stream_conforms()
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        finish = [c.choices[0].finish_reason for c in chunks if c.choices][-1]
        return text, finish, chunks[-1].usage

    def assert_stream_conforms(self, *, whole: bool = True) -> list[Any]:
        *chunks, done = events = self.tap.last_events()
        if whole:
            assert done == "[DONE]"
        else:
            chunks = events
        for chunk in chunks:
            assert_chunk(chunk)
        return chunks


@STREAMED
async def test_it_answers_a_plain_reply(conformance: Gateway, caller: Caller, stream: bool) -> None:
    text, finish, _ = await Python(conformance, caller.key).answer(stream)
    assert (text, finish) == (full_reply(SHORT), "stop")


@STREAMED
async def test_it_counts_the_usage(conformance: Gateway, caller: Caller, stream: bool) -> None:
    options = {"stream_options": {"include_usage": True}} if stream else {}
    _, _, usage = await Python(conformance, caller.key).answer(stream, **options)
    assert usage is not None and usage.completion_tokens == SHORT
    assert usage.prompt_tokens > 0 and usage.total_tokens == usage.prompt_tokens + SHORT


@STREAMED
async def test_max_tokens_ends_the_reply_with_length(
    conformance: Gateway, caller: Caller, stream: bool
) -> None:
    text, finish, _ = await Python(conformance, caller.key).answer(stream, max_tokens=3)
    assert (text, finish) == (full_reply(3), "length")


@STREAMED
@pytest.mark.parametrize("case", REFUSALS)
async def test_a_refusal_is_the_sdks_own_exception(
    conformance: Gateway, caller: Caller, stream: bool, case: str
) -> None:
    changes, status, code, param = REFUSALS[case]
    client = Python(conformance, caller.key_for(case))
    with pytest.raises(EXCEPTIONS[status]) as refused:
        await client.answer(stream, **changes)
    assert refused.value.status_code == status
    assert (refused.value.code, refused.value.param) == (code, param)


async def test_closing_the_stream_stops_the_engine(conformance: Gateway, caller: Caller) -> None:
    client = Python(conformance, caller.key)
    raw = await client.sdk.chat.completions.with_raw_response.create(
        model="long", messages=GO_ON, stream=True
    )
    stream = raw.parse()
    read = [await anext(stream) for _ in range(4)]  # the role, then three pieces of text
    await stream.close()

    assert len(client.assert_stream_conforms(whole=False)) >= len(read)
    row = await assert_engine_stopped(conformance, raw.headers["x-chatsite-conversation"])
    assert row.cancelled_by == "client_disconnect"


@STREAMED
async def test_a_reply_stopped_from_a_tab_ends_with_stop(
    conformance: Gateway, caller: Caller, stream: bool
) -> None:
    # OpenAI's finish reasons have no word for it; chatsite's own reason is an extension.
    client = Python(conformance, caller.key)
    if stream:
        raw = await client.sdk.chat.completions.with_raw_response.create(
            model="long", messages=GO_ON, stream=True
        )
        chunks = raw.parse()
        first = await anext(chunks)
        conversation_id: Any = raw.headers["x-chatsite-conversation"]
        await stop_from_tab(conformance, caller, conversation_id)
        rest = [chunk async for chunk in chunks]
        wire = client.assert_stream_conforms()[-1]["choices"][0]  # the last chunk, as sent
        text = "".join(c.choices[0].delta.content or "" for c in [first, *rest] if c.choices)
        finish = rest[-1].choices[0].finish_reason
    else:
        call = asyncio.ensure_future(
            client.sdk.chat.completions.create(model="long", messages=GO_ON)
        )
        conversation_id = (await conversation_being_written(caller.user)).pk
        await stop_from_tab(conformance, caller, conversation_id)
        completion = await call
        assert_completion(client.tap.last_json())
        wire = client.tap.last_json()["choices"][0]
        text, finish = completion.choices[0].message.content, completion.choices[0].finish_reason

    row = await assert_engine_stopped(conformance, conversation_id)
    assert row.cancelled_by == caller.user.username and text == row.content
    assert finish == "stop" and wire["chatsite_finish_reason"] == "cancelled"

"""A request body into a ChatCall, or a 400 naming the parameter (no server needed)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from conversations.engines.base import ChatMessage
from conversations.gateway.errors import GatewayError
from conversations.gateway.wire import ChatCall, parse_chat_call, parse_conversation_header

HELLO = [{"role": "user", "content": "Hello"}]


def parse(**body: Any) -> ChatCall:
    return parse_chat_call(json.dumps({"model": "default", "messages": HELLO, **body}).encode())


def refusal(**body: Any) -> GatewayError:
    with pytest.raises(GatewayError) as refused:
        parse(**body)
    assert refused.value.status == 400
    return refused.value


def test_it_splits_a_conversation_into_prompt_history_and_turn() -> None:
    call = parse(
        messages=[
            {"role": "system", "content": "Be brief."},
            {
                "role": "user",
                "content": [{"type": "text", "text": "Hi "}, {"type": "text", "text": "there"}],
            },
            {"role": "assistant", "content": None},
            {"role": "developer", "content": "In French."},
            {"role": "user", "content": "  How are you?  "},
        ]
    )
    assert call.system_prompt == "Be brief.\n\nIn French."
    assert call.history == (ChatMessage("user", "Hi there"), ChatMessage("assistant", ""))
    assert call.content == "How are you?" and call.first_question == "Hi there"


def test_it_reads_the_sampling_and_stream_options() -> None:
    call = parse(
        stream=True,
        stream_options={"include_usage": True},
        max_tokens=9,
        max_completion_tokens=12,
        temperature=0,
        top_p=1,
        stop="END",
        seed=-3,
        n=1,
        user="someone",
        tool_choice="none",
    )
    assert (call.stream, call.include_usage) == (True, True)
    assert call.max_tokens == 12, "max_completion_tokens wins over the older name"
    assert (call.temperature, call.top_p, call.stop, call.seed) == (0.0, 1.0, ("END",), -3)
    defaults = parse()
    assert (defaults.stream, defaults.system_prompt, defaults.max_tokens) == (False, None, None)


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": ""}, "model"),
        ({"model": 3}, "model"),
        ({"messages": []}, "messages"),
        ({"messages": "Hello"}, "messages"),
        ({"messages": [{"role": "user", "content": "a\u0000b"}]}, "messages[0].content"),
        ({"messages": [{"role": "user", "content": "   "}]}, "messages[0].content"),
        ({"messages": [{"role": "user", "content": None}]}, "messages[0].content"),
        ({"messages": [{"role": "user", "content": "x" * 8001}]}, "messages[0].content"),
        ({"messages": [*HELLO, {"role": "assistant", "content": "Hi"}]}, "messages[1].role"),
        (
            {"messages": [{"role": "assistant", "tool_calls": [{}], "content": None}, *HELLO]},
            "messages[0].tool_calls[0]",
        ),
        ({"seed": 2**64}, "seed"),
        ({"temperature": True}, "temperature"),
        ({"temperature": "hot"}, "temperature"),
        ({"max_completion_tokens": 1.5}, "max_completion_tokens"),
        ({"stop": [""]}, "stop"),
        ({"stream": "yes"}, "stream"),
        ({"stream": True, "stream_options": {"include_usage": 1}}, "stream_options.include_usage"),
        ({"tools": [{"type": "function"}]}, "tools[0].function"),
        ({"tools": {"type": "function"}}, "tools"),
        ({"presence_penalty": 0.5}, "presence_penalty"),
        ({"logit_bias": {"1": 2}}, "logit_bias"),
        ({"modalities": ["text", "audio"]}, "modalities"),
    ],
)
def test_it_names_what_it_refuses(body: dict[str, Any], param: str) -> None:
    assert refusal(**body).param == param


def test_a_body_that_is_not_a_json_object_is_refused() -> None:
    for body in (b"{", b"[]", b"[" * 100_000):
        with pytest.raises(GatewayError) as refused:
            parse_chat_call(body)
        assert refused.value.code == "invalid_json"


def test_the_conversation_header_is_a_uuid_or_nothing() -> None:
    assert parse_conversation_header(None) is None and parse_conversation_header(" ") is None
    value = "5a1f0c2e-8d7b-4a8e-9a55-0c1f2d3e4f50"
    assert str(parse_conversation_header(value)) == value
    with pytest.raises(GatewayError) as refused:
        parse_conversation_header("../admin")
    assert refused.value.code == "invalid_conversation"

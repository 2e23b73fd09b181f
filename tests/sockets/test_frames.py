"""parse_frame on its own: every way a client frame can be wrong has its own error code."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from conversations.sockets.frames import (
    MAX_FRAME_BYTES,
    MAX_IDEMPOTENCY_KEY,
    CancelFrame,
    FrameError,
    SendFrame,
    frame_limit,
    parse_frame,
)

CONVERSATION = str(uuid.uuid4())


def parse(frame: Any) -> SendFrame | CancelFrame:
    raw = frame if isinstance(frame, str) or frame is None else json.dumps(frame)
    return parse_frame(raw, conversation_id=CONVERSATION)


def parse_send(frame: Any) -> SendFrame:
    parsed = parse(frame)
    assert isinstance(parsed, SendFrame)
    return parsed


def error_code(frame: Any) -> str:
    with pytest.raises(FrameError) as caught:
        parse(frame)
    assert caught.value.message, "every refusal says what is wrong"
    return caught.value.code


@pytest.fixture(autouse=True)
def prompt_limit(settings: Any) -> int:
    settings.CHAT_MAX_PROMPT_CHARS = 100
    return 100


def test_it_parses_a_send() -> None:
    frame = parse({"action": "send", "content": "  Hello  ", "idempotency_key": "k-1"})
    assert frame == SendFrame(content="Hello", idempotency_key="k-1")


def test_it_parses_a_cancel() -> None:
    assert parse({"action": "cancel"}) == CancelFrame()


def test_it_ignores_the_fields_htmx_adds() -> None:
    frame = parse(
        {"action": "send", "content": "hi", "HEADERS": {"HX-Request": "true", "HX-Target": None}}
    )
    assert frame == SendFrame(content="hi")


def test_it_treats_a_null_or_empty_key_as_no_key() -> None:
    for key in (None, ""):
        frame = parse_send({"action": "send", "content": "hi", "idempotency_key": key})
        assert frame.idempotency_key == ""


def test_it_accepts_its_own_conversation_in_any_uuid_spelling() -> None:
    for spelling in (CONVERSATION, CONVERSATION.upper(), uuid.UUID(CONVERSATION).hex):
        assert parse({"action": "cancel", "conversation": spelling}) == CancelFrame()


def test_it_refuses_a_frame_for_another_conversation() -> None:
    for other in (str(uuid.uuid4()), "not-a-uuid", 42, [CONVERSATION]):
        assert error_code({"action": "send", "content": "hi", "conversation": other}) == (
            "wrong_conversation"
        )


def test_it_refuses_binary_frames() -> None:
    assert error_code(None) == "bad_frame"


@pytest.mark.parametrize("raw", ["", "{", "send", "{'action': 'send'}", "[1,", "\x00"])
def test_it_refuses_malformed_json(raw: str) -> None:
    assert error_code(raw) == "bad_json"


def test_it_refuses_json_nested_too_deep_for_the_parser() -> None:
    # The parser raises RecursionError here, not ValueError; it must still be a clean refusal.
    assert error_code("[" * 50_000) == "bad_json"
    assert error_code('{"a":' * 10_000) == "bad_json"


@pytest.mark.parametrize("value", [[], ["send"], "send", 1, None, True])
def test_it_refuses_json_that_is_not_an_object(value: Any) -> None:
    assert error_code(json.dumps(value)) == "bad_frame"


@pytest.mark.parametrize("action", [None, "", "SEND", "delete", 1, ["send"], {"send": 1}])
def test_it_refuses_unknown_actions(action: Any) -> None:
    frame = {"content": "hi"} if action is None else {"action": action, "content": "hi"}
    assert error_code(frame) == "unknown_action"


@pytest.mark.parametrize("content", [None, 1, 1.5, True, ["hi"], {"text": "hi"}])
def test_it_refuses_content_that_is_not_text(content: Any) -> None:
    frame = {"action": "send"} if content is None else {"action": "send", "content": content}
    assert error_code(frame) == "bad_content"


@pytest.mark.parametrize("content", ["a\x00b", "\ud800", "x\udfffy"])
def test_it_refuses_content_a_database_cannot_store(content: str) -> None:
    # json.dumps escapes these as \u0000 / \ud800, which json.loads turns back into them.
    assert error_code({"action": "send", "content": content}) == "bad_content"


@pytest.mark.parametrize("content", ["", " ", "\n\t  \r\n", "\u2003\u3000"])
def test_it_refuses_an_empty_prompt(content: str) -> None:
    assert error_code({"action": "send", "content": content}) == "empty"


def test_it_refuses_a_prompt_over_the_limit(prompt_limit: int) -> None:
    assert parse({"action": "send", "content": "x" * prompt_limit}) == SendFrame("x" * prompt_limit)
    assert error_code({"action": "send", "content": "x" * (prompt_limit + 1)}) == "too_long"


def test_it_measures_the_prompt_after_trimming_it(prompt_limit: int) -> None:
    padded = "  " + "x" * prompt_limit + "\n\n"
    assert parse({"action": "send", "content": padded}) == SendFrame("x" * prompt_limit)


def test_the_prompt_limit_is_a_setting(settings: Any) -> None:
    settings.CHAT_MAX_PROMPT_CHARS = 5
    assert error_code({"action": "send", "content": "123456"}) == "too_long"
    settings.CHAT_MAX_PROMPT_CHARS = 6
    assert parse({"action": "send", "content": "123456"}) == SendFrame("123456")


@pytest.mark.parametrize(
    "key", [1, 0, False, ["k"], {"k": 1}, "k" * (MAX_IDEMPOTENCY_KEY + 1), "a\x00b", "\ud800"]
)
def test_it_refuses_a_bad_idempotency_key(key: Any) -> None:
    frame = {"action": "send", "content": "hi", "idempotency_key": key}
    assert error_code(frame) == "bad_idempotency_key"


def test_it_accepts_the_longest_idempotency_key() -> None:
    key = "k" * MAX_IDEMPOTENCY_KEY
    assert (
        parse_send({"action": "send", "content": "hi", "idempotency_key": key}).idempotency_key
        == key
    )


def test_it_refuses_an_oversized_frame_before_parsing_it() -> None:
    assert frame_limit() == MAX_FRAME_BYTES  # a 100-character prompt needs no more
    padding = "x" * MAX_FRAME_BYTES
    assert error_code(json.dumps({"action": "send", "content": "hi", "pad": padding})) == (
        "too_large"
    )


def test_it_counts_frame_size_in_bytes_not_characters() -> None:
    # 30,000 three-byte characters: under the limit in characters, over it in bytes.
    raw = json.dumps({"action": "cancel", "pad": "\u20ac" * 30_000}, ensure_ascii=False)
    assert len(raw) < MAX_FRAME_BYTES < len(raw.encode())
    assert error_code(raw) == "too_large"


def test_the_frame_limit_leaves_room_for_the_longest_prompt(settings: Any) -> None:
    # Every character an astral one, escaped by json.dumps as two \uXXXX escapes: 12 bytes each.
    settings.CHAT_MAX_PROMPT_CHARS = 20_000
    content = "\U0001f600" * 20_000
    raw = json.dumps({"action": "send", "content": content, "idempotency_key": "k" * 64})
    assert len(raw) > MAX_FRAME_BYTES
    assert parse(raw) == SendFrame(content=content, idempotency_key="k" * 64)


def test_it_checks_the_conversation_before_the_action() -> None:
    # A frame aimed at another conversation is refused as such, whatever it asks for.
    other = str(uuid.uuid4())
    assert error_code({"action": "cancel", "conversation": other}) == "wrong_conversation"

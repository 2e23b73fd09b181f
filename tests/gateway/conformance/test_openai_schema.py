"""The schema check itself: chatsite's shapes pass, and each way of breaking OpenAI's schema is
caught and named (a check that let everything through would make the suite pass vacuously)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from tests.gateway.conformance.openai_schema import assert_chunk, problems

CHUNK: dict[str, Any] = {
    "id": "chatcmpl-1",
    "object": "chat.completion.chunk",
    "created": 1700000000,
    "model": "default",
    "choices": [
        {"index": 0, "delta": {"content": "alpha0 "}, "logprobs": None, "finish_reason": None}
    ],
    "usage": None,
}
COMPLETION: dict[str, Any] = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1700000000,
    "model": "default",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "alpha0 ", "refusal": None},
            "logprobs": None,
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
}


def changed(base: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of `base` with the field at the dotted `path` set to `value` (or removed)."""
    result = copy.deepcopy(base)
    *parents, last = path.split(".")
    target: Any = result
    for part in parents:
        target = target[int(part)] if part.isdigit() else target[part]
    if value is REMOVED:
        del target[last]
    else:
        target[last] = value
    return result


REMOVED = object()


def test_it_passes_chatsites_chunks_and_completions() -> None:
    assert problems(CHUNK, ChatCompletionChunk) == []
    assert (
        problems({**CHUNK, "choices": [], "usage": COMPLETION["usage"]}, ChatCompletionChunk) == []
    )
    assert problems(COMPLETION, ChatCompletion) == []
    extended = changed(CHUNK, "choices.0.chatsite_finish_reason", "abort")
    assert problems(changed(extended, "choices.0.finish_reason", "stop"), ChatCompletionChunk) == []


@pytest.mark.parametrize(
    ("path", "value", "problem"),
    [
        ("created", REMOVED, "$.created: missing"),
        ("object", "chat.completion", "$.object: 'chat.completion' is not one of"),
        ("created", "1700000000", "$.created: '1700000000', not int"),
        ("choices.0.index", True, "$.choices[0].index: True, not int"),
        ("choices.0.finish_reason", "abort", "$.choices[0].finish_reason: 'abort' is not one of"),
        ("choices.0.finish_reason", REMOVED, "$.choices[0].finish_reason: missing"),
        ("choices.0.delta.role", "robot", "$.choices[0].delta.role: 'robot' is not one of"),
        ("choices.0.delta.content", 7, "$.choices[0].delta.content: 7, not str"),
        ("choices.0.delta", "alpha0", "$.choices[0].delta: str, not an object"),
        ("choices.0.abort_reason", "tab", "$.choices[0].abort_reason: not a field of Choice"),
        ("chatsite_finish_reason", "abort", "$.chatsite_finish_reason: not a field of"),
        (
            "usage",
            {"prompt_tokens": 1, "total_tokens": 1},
            "$.usage.completion_tokens: missing",
        ),
    ],
)
def test_it_names_what_breaks_a_chunk(path: str, value: Any, problem: str) -> None:
    found = problems(changed(CHUNK, path, value), ChatCompletionChunk)
    assert len(found) == 1 and found[0].startswith(problem), found


@pytest.mark.parametrize(
    ("path", "value", "problem"),
    [
        ("choices.0.finish_reason", None, "$.choices[0].finish_reason: None is not one of"),
        ("choices.0.message.content", REMOVED, "$.choices[0].message.content: missing"),
        ("choices.0.message.refusal", REMOVED, "$.choices[0].message.refusal: missing"),
        ("choices.0.message.role", "user", "$.choices[0].message.role: 'user' is not one of"),
        ("usage.total_tokens", 4.5, "$.usage.total_tokens: 4.5, not int"),
        ("choices", {}, "$.choices: dict, not a list"),
    ],
)
def test_it_names_what_breaks_a_completion(path: str, value: Any, problem: str) -> None:
    found = problems(changed(COMPLETION, path, value), ChatCompletion)
    assert len(found) == 1 and found[0].startswith(problem), found


def test_a_chunk_with_a_finish_reason_not_openais_fails_the_assertion() -> None:
    with pytest.raises(AssertionError, match="abort"):
        assert_chunk(changed(CHUNK, "choices.0.finish_reason", "abort"))

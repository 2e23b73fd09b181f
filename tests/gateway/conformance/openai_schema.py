"""Held field by field to OpenAI's published schema: the openai Python SDK's types, generated from
OpenAI's OpenAPI spec (`ChatCompletionChunk`, `ChatCompletion`), read as a schema and checked
strictly, which the SDK itself never does (it builds its objects without validating them and
keeps unknown fields).

Strictly means: every field a type requires is present, every value has its field's type
(`bool` is no `int`, a `Literal` allows its values only, so `finish_reason` is one of OpenAI's),
and no field is there that the type does not name, but for chatsite's documented extensions.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from typing import Any

import typing_extensions
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionMessage,
    chat_completion,
    chat_completion_chunk,
)
from pydantic import BaseModel

OPENAI_FINISH_REASONS = {"stop", "length", "tool_calls", "content_filter", "function_call"}

# Fields chatsite adds and docs/gateway.md documents, by the type they extend; clients ignore them.
EXTENSIONS: Mapping[type[BaseModel], frozenset[str]] = {
    chat_completion_chunk.Choice: frozenset({"chatsite_finish_reason"}),
    chat_completion.Choice: frozenset({"chatsite_finish_reason"}),
}

# Required in OpenAI's spec although nullable; the generated types give every nullable field a
# default of None, which would let a missing one pass.
REQUIRED_WHEN_NULL: Mapping[type[BaseModel], frozenset[str]] = {
    chat_completion_chunk.Choice: frozenset({"finish_reason"}),
    ChatCompletionMessage: frozenset({"content", "refusal"}),
}

_LITERALS = {typing.Literal, typing_extensions.Literal}
_UNIONS = {typing.Union, types.UnionType}


def problems(value: Any, model: type[BaseModel], where: str = "$") -> list[str]:
    """What in the JSON object `value` breaks `model`'s schema: one line per problem, each
    naming its place (`$.choices[0].delta.role`); empty when it conforms."""
    if not isinstance(value, dict):
        return [f"{where}: {type(value).__name__}, not an object ({model.__name__})"]
    found: list[str] = []
    known: set[str] = set()
    for name, info in model.model_fields.items():
        key = info.alias or name
        known.add(key)
        if key not in value:
            if info.is_required() or key in REQUIRED_WHEN_NULL.get(model, ()):
                found.append(f"{where}.{key}: missing (required by {model.__name__})")
            continue
        found += _type_problems(value[key], info.annotation, f"{where}.{key}")
    unknown = set(value) - known - EXTENSIONS.get(model, frozenset())
    found += [f"{where}.{key}: not a field of {model.__name__}" for key in sorted(unknown)]
    return found


def _type_problems(value: Any, annotation: Any, where: str) -> list[str]:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation in (Any, object):
        return []
    if origin is typing.Annotated:
        return _type_problems(value, args[0], where)
    if origin in _UNIONS:
        # Conforms when one member fits; otherwise say what the closest one found (for a value
        # that is not null, not that it is not null).
        members = [m for m in args if value is None or m is not type(None)]
        attempts = [_type_problems(value, member, where) for member in members]
        return [] if any(not attempt for attempt in attempts) else min(attempts, key=len)
    if origin in _LITERALS:
        return [] if value in args else [f"{where}: {value!r} is not one of {list(args)}"]
    if annotation is type(None):
        return [] if value is None else [f"{where}: {value!r}, not null"]
    if origin is list:
        if not isinstance(value, list):
            return [f"{where}: {type(value).__name__}, not a list"]
        return [
            p
            for i, item in enumerate(value)
            for p in _type_problems(item, args[0], f"{where}[{i}]")
        ]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__}, not an object"]
        return [
            p for k, item in value.items() for p in _type_problems(item, args[1], f"{where}.{k}")
        ]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return problems(value, annotation, where)
    return _scalar_problems(value, annotation, where)


def _scalar_problems(value: Any, annotation: Any, where: str) -> list[str]:
    # JSON's numbers: an int is a float too, but true and false are neither.
    accepted = {str: (str,), int: (int,), float: (int, float), bool: (bool,)}.get(annotation)
    if accepted is None:
        return [f"{where}: the checker does not know the type {annotation!r}"]
    if isinstance(value, bool) and annotation is not bool:
        return [f"{where}: {value!r}, not {annotation.__name__}"]
    if not isinstance(value, accepted):
        return [f"{where}: {value!r}, not {annotation.__name__}"]
    return []


def assert_chunk(chunk: Any) -> None:
    """A streamed chunk conforms to ChatCompletionChunk, with OpenAI's finish reasons only."""
    assert not (found := problems(chunk, ChatCompletionChunk)), found
    for choice in chunk["choices"]:
        assert choice["finish_reason"] in {None, *OPENAI_FINISH_REASONS}, choice


def assert_completion(completion: Any) -> None:
    """A whole answer conforms to ChatCompletion, with OpenAI's finish reasons only."""
    assert not (found := problems(completion, ChatCompletion)), found
    for choice in completion["choices"]:
        assert choice["finish_reason"] in OPENAI_FINISH_REASONS, choice

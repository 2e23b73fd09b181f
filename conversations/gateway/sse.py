"""The objects of OpenAI's Chat Completions wire format, and server-sent events carrying them.

A streamed reply is `data: <chunk>` events: a first chunk with the role, one per piece of text
as the generation sends it (coalesced as the chat page's frames are), a last one with the
finish reason, with `stream_options.include_usage` a chunk with no choices and the usage, then
`data: [DONE]`. A failure after the first chunk is one `data: {"error": {...}}` event, as
OpenAI-compatible servers send one, and the stream ends there without `[DONE]`: a client that
does not look for errors cannot take it for a whole reply.

Finish reasons are OpenAI's: "stop" or "length" when the model ended the reply, "tool_calls" when
it called tools (their calls come in one chunk before the last, whole), and "stop" too when
someone stopped it (a Stop in the chat page): OpenAI has no word for that, and clients raise on
one they do not know, so chatsite's own ("cancelled") is in `chatsite_finish_reason`, an extra
field of the choice that clients ignore.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from conversations.events.payloads import MessagePayload

DONE = b"data: [DONE]\n\n"
OWN_REASON = "chatsite_finish_reason"  # a choice's extra field: why a stopped reply ended
CANCELLED = "cancelled"


def event(data: Mapping[str, Any]) -> bytes:
    return b"data: " + json.dumps(data, separators=(",", ":")).encode() + b"\n\n"


def usage(saved: MessagePayload) -> dict[str, int]:
    prompt = saved["prompt_tokens"] or 0
    completion = saved["completion_tokens"] or 0
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def finish_reason(saved: MessagePayload) -> dict[str, str]:
    """The choice's finish_reason, OpenAI's word for how the reply ended, and for a stopped
    reply chatsite's own beside it."""
    if saved["status"] == "cancelled":
        return {"finish_reason": "stop", OWN_REASON: CANCELLED}
    if saved["tool_calls"]:
        return {"finish_reason": "tool_calls"}
    return {"finish_reason": "length" if saved["finish_reason"] == "length" else "stop"}


def tool_call_deltas(saved: MessagePayload) -> list[dict[str, Any]]:
    """The reply's tool calls as a streamed delta carries them, each whole, with its index."""
    return [{"index": index, **call} for index, call in enumerate(saved["tool_calls"])]


@dataclass(frozen=True)
class Completion:
    """One call's reply as the wire format names it."""

    id: str  # "chatcmpl-" and the reply's request id
    created: int  # Unix seconds
    model: str  # the model's slug, as the caller named it
    include_usage: bool = False

    @classmethod
    def of(cls, request_id: str, created: int, model: str, include_usage: bool) -> Completion:
        return cls(f"chatcmpl-{request_id}", created, model, include_usage)

    def _head(self, kind: str) -> dict[str, Any]:
        return {"id": self.id, "object": kind, "created": self.created, "model": self.model}

    def chunk(self, delta: dict[str, Any], finish: dict[str, str] | None = None) -> bytes:
        """`finish`: finish_reason's fields (see finish_reason), for the last chunk only."""
        body = self._head("chat.completion.chunk")
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}
        body["choices"] = [{**choice, **(finish or {})}]
        if self.include_usage:
            body["usage"] = None  # every chunk but the usage chunk says so, as OpenAI's do
        return event(body)

    def usage_chunk(self, saved: MessagePayload) -> bytes:
        return event({**self._head("chat.completion.chunk"), "choices": [], "usage": usage(saved)})

    def whole(self, saved: MessagePayload) -> dict[str, Any]:
        """The non-streamed answer: the saved reply and its usage."""
        message: dict[str, Any] = {
            "role": "assistant",
            "content": saved["content"],
            "refusal": None,
        }
        if saved["tool_calls"]:
            message["tool_calls"] = saved["tool_calls"]
            message["content"] = saved["content"] or None  # as OpenAI's: no text, null
        choice = {"index": 0, "message": message, "logprobs": None, **finish_reason(saved)}
        return {**self._head("chat.completion"), "choices": [choice], "usage": usage(saved)}

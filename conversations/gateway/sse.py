"""The objects of OpenAI's Chat Completions wire format, and server-sent events carrying them.

A streamed reply is `data: <chunk>` events: a first chunk with the role, one per piece of text
as the generation sends it (coalesced as the chat page's frames are), a last one with the
finish reason, with `stream_options.include_usage` a chunk with no choices and the usage, then
`data: [DONE]`. A failure after the first chunk is one `data: {"error": {...}}` event, as
OpenAI-compatible servers send one, and the stream ends there without `[DONE]`: a client that
does not look for errors cannot take it for a whole reply.

Finish reasons are the reply's own: "stop" or "length" when the model ended it, "abort" when
someone stopped it (a Stop in the chat page; vLLM's word for it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from conversations.events.protocol import MessagePayload

DONE = b"data: [DONE]\n\n"
ABORTED = "abort"


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


def finish_reason(saved: MessagePayload) -> str:
    """The engine's reason ("stop", "length", "abort"), or the status's when it gave none."""
    if saved["finish_reason"]:
        return saved["finish_reason"]
    return ABORTED if saved["status"] == "cancelled" else "stop"


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

    def chunk(self, delta: dict[str, str], finish: str | None = None) -> bytes:
        body = self._head("chat.completion.chunk")
        body["choices"] = [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
        if self.include_usage:
            body["usage"] = None  # every chunk but the usage chunk says so, as OpenAI's do
        return event(body)

    def usage_chunk(self, saved: MessagePayload) -> bytes:
        return event({**self._head("chat.completion.chunk"), "choices": [], "usage": usage(saved)})

    def whole(self, saved: MessagePayload) -> dict[str, Any]:
        """The non-streamed answer: the saved reply and its usage."""
        message = {"role": "assistant", "content": saved["content"], "refusal": None}
        choice = {
            "index": 0,
            "message": message,
            "logprobs": None,
            "finish_reason": finish_reason(saved),
        }
        return {**self._head("chat.completion"), "choices": [choice], "usage": usage(saved)}

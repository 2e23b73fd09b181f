"""OpenAI's Responses API (`POST /v1/responses`) for plain text: its request read as the Chat
Completions call it amounts to, its answer and its stream of events written in its own shape.

What newer SDK code sends: `input` (a string, or a list of messages whose content is text or
input_text/output_text parts), `instructions` (the system prompt), `max_output_tokens`,
`temperature`, `top_p`, `stream`. The call then goes through the same generation as a chat
completion, recorded, limited and stoppable alike. What the Responses API has beyond text here
(tools, images and files, reasoning, `previous_response_id` and stored conversations, structured
output) is refused by name: tool calling and files are served by /v1/chat/completions.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from conversations.events.payloads import MessagePayload
from conversations.gateway.errors import (
    UNSUPPORTED_CONTENT,
    UNSUPPORTED_PARAMETER,
    GatewayError,
    bad_request,
)
from conversations.gateway.sse import CANCELLED, OWN_REASON
from conversations.gateway.wire import ChatCall, chat_call_of, json_object

_TEXT_PARTS = {"input_text", "output_text", "text"}
_ROLES = {"user", "assistant", "system", "developer"}
# Each would change the answer in a way this server does not serve: refused whatever the value.
_NOT_SERVED = {
    "previous_response_id": "Stored responses are not kept: send the whole input each time",
    "conversation": "Stored conversations are not served here: send the whole input each time",
    "reasoning": "Reasoning settings are not supported",
    "prompt": "Stored prompts are not supported",
    "include": "Extra output (include) is not supported",
    "max_tool_calls": "Tools are not served by /v1/responses: use /v1/chat/completions",
}
_NOT_TEXT = "only text is served by /v1/responses (files and images: /v1/chat/completions)"


def parse_response_call(body: bytes) -> ChatCall:
    data = json_object(body)
    _refuse_unsupported(data)
    chat: dict[str, Any] = {
        "model": data.get("model"),
        "messages": _messages(data.get("input")),
        "stream": data.get("stream"),
        "max_completion_tokens": data.get("max_output_tokens"),
        "temperature": data.get("temperature"),
        "top_p": data.get("top_p"),
    }
    try:
        call = chat_call_of({name: value for name, value in chat.items() if value is not None})
    except GatewayError as refusal:
        raise _in_responses_words(refusal, data) from None
    instructions = data.get("instructions")
    if instructions is None:
        return call
    if not isinstance(instructions, str):
        raise bad_request("instructions must be text.", "instructions")
    system = "\n\n".join(p for p in (instructions, call.system_prompt) if p)
    return dataclasses.replace(call, system_prompt=system)


def _refuse_unsupported(data: Mapping[str, Any]) -> None:
    for name, why in _NOT_SERVED.items():
        if data.get(name) is not None:
            raise bad_request(f"{why}.", name, UNSUPPORTED_PARAMETER)
    if data.get("tools") or data.get("tool_choice") not in (None, "none", "auto"):
        name = "tools" if data.get("tools") else "tool_choice"
        raise bad_request(
            "Tools are not served by /v1/responses: /v1/chat/completions has tool calling.",
            name,
            UNSUPPORTED_PARAMETER,
        )
    text = data.get("text")
    if text is not None and text != {"format": {"type": "text"}}:
        raise bad_request("Only the text format is supported.", "text", UNSUPPORTED_PARAMETER)
    if data.get("background"):
        raise bad_request(
            "Background responses are not served.", "background", UNSUPPORTED_PARAMETER
        )


def _messages(raw: object) -> object:
    """`input` as Chat Completions messages; what is not a text message is refused naming it,
    and anything else is left for chat_call_of to judge (its refusal renamed for `input`)."""
    if isinstance(raw, str):
        return [{"role": "user", "content": raw}]
    if not isinstance(raw, list):
        return raw
    messages = []
    for index, item in enumerate(raw):
        where = f"input[{index}]"
        kind = item.get("type", "message") if isinstance(item, dict) else None
        if kind != "message" or item.get("role") not in _ROLES:
            raise bad_request(
                f"{where} must be a message: {_NOT_TEXT}.", where, UNSUPPORTED_CONTENT
            )
        messages.append({"role": item["role"], "content": _content(item.get("content"), where)})
    return messages


def _content(raw: object, where: str) -> object:
    if not isinstance(raw, list):
        return raw
    parts = []
    for index, part in enumerate(raw):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in _TEXT_PARTS:
            at = f"{where}.content[{index}]"
            raise bad_request(f"{at} is not text: {_NOT_TEXT}.", at, UNSUPPORTED_CONTENT)
        parts.append({"type": "text", "text": part.get("text")})
    return parts


def _in_responses_words(refusal: GatewayError, data: Mapping[str, Any]) -> GatewayError:
    """A refusal of the chat call it amounts to, naming the Responses API's fields."""
    param = refusal.param or ""
    if param.startswith("messages"):
        param = "input" + param.removeprefix("messages")
        if isinstance(data.get("input"), str):
            param = "input"
    param = {"max_completion_tokens": "max_output_tokens"}.get(param, param)
    message = refusal.message.replace("max_completion_tokens", "max_output_tokens")
    message = message.replace("messages", "input")
    return dataclasses.replace(refusal, message=message, param=param or None)


@dataclass
class ResponseShape:
    """One call's answer in the Responses API's shape, and its stream's events in order."""

    id: str  # "resp_" and the reply's request id
    created_at: int
    model: str
    instructions: str | None
    sequence: int = 0

    @classmethod
    def of(cls, request_id: str, created_at: int, model: str, call: ChatCall) -> ResponseShape:
        return cls(f"resp_{request_id}", created_at, model, call.system_prompt)

    @property
    def item_id(self) -> str:
        return "msg_" + self.id.removeprefix("resp_")

    def whole(self, saved: MessagePayload | None, *, status: str | None = None) -> dict[str, Any]:
        """The response object: in progress (no `saved` yet), or as the reply was saved."""
        output: list[dict[str, Any]] = []
        usage = None
        incomplete = None
        if saved is not None:
            status = status or _status(saved)
            output = [
                self.message(
                    saved["content"], "completed" if status == "completed" else "incomplete"
                )
            ]
            prompt, completion = saved["prompt_tokens"] or 0, saved["completion_tokens"] or 0
            usage = {
                "input_tokens": prompt,
                "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                "output_tokens": completion,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": prompt + completion,
            }
            if saved["finish_reason"] == "length":
                incomplete = {"reason": "max_output_tokens"}
        own = (
            {OWN_REASON: CANCELLED} if saved is not None and saved["status"] == "cancelled" else {}
        )
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": status or "in_progress",
            "model": self.model,
            "instructions": self.instructions,
            "output": output,
            "parallel_tool_calls": False,
            "tool_choice": "none",
            "tools": [],
            "error": None,
            "incomplete_details": incomplete,
            "usage": usage,
            **own,
        }

    def message(self, text: str, status: str) -> dict[str, Any]:
        return {
            "type": "message",
            "id": self.item_id,
            "status": status,
            "role": "assistant",
            "content": [self.text_part(text)] if status != "in_progress" else [],
        }

    @staticmethod
    def text_part(text: str) -> dict[str, Any]:
        return {"type": "output_text", "text": text, "annotations": []}

    def event(self, kind: str, **fields: Any) -> bytes:
        """One server-sent event: its type named twice, as OpenAI's stream does (`event:` and
        the data's `type`), numbered in order."""
        body = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        data = json.dumps(body, separators=(",", ":"))
        return f"event: {kind}\ndata: {data}\n\n".encode()

    def start(self) -> list[bytes]:
        part = {"item_id": self.item_id, "output_index": 0, "content_index": 0}
        return [
            self.event("response.created", response=self.whole(None)),
            self.event("response.in_progress", response=self.whole(None)),
            self.event(
                "response.output_item.added", output_index=0, item=self.message("", "in_progress")
            ),
            self.event("response.content_part.added", **part, part=self.text_part("")),
        ]

    def delta(self, text: str) -> bytes:
        return self.event(
            "response.output_text.delta",
            item_id=self.item_id,
            output_index=0,
            content_index=0,
            delta=text,
            logprobs=[],
        )

    def end(self, saved: MessagePayload) -> list[bytes]:
        part = {"item_id": self.item_id, "output_index": 0, "content_index": 0}
        whole = self.whole(saved)
        (item,) = whole["output"]
        ending = "response.completed" if whole["status"] == "completed" else "response.incomplete"
        return [
            self.event("response.output_text.done", **part, text=saved["content"], logprobs=[]),
            self.event("response.content_part.done", **part, part=self.text_part(saved["content"])),
            self.event("response.output_item.done", output_index=0, item=item),
            self.event(ending, response=whole),
        ]

    def failure(self, refusal: GatewayError) -> bytes:
        error = refusal.body()["error"]
        return self.event(
            "error", code=error["code"], message=error["message"], param=error["param"]
        )


def _status(saved: MessagePayload) -> str:
    """completed; incomplete when cut at max_output_tokens or stopped (a Stop in the chat page:
    chatsite_finish_reason says so, as in a chat completion)."""
    if saved["status"] == "cancelled" or saved["finish_reason"] == "length":
        return "incomplete"
    return "completed"

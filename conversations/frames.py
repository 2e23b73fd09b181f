"""Validation of what a browser or API client sends over the conversation socket."""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.conf import settings

MAX_FRAME_BYTES = 64 * 1024
MAX_IDEMPOTENCY_KEY = 64


class FrameError(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class SendFrame:
    content: str
    idempotency_key: str = ""


@dataclass(frozen=True)
class CancelFrame:
    pass


def parse_frame(raw: str | None, *, conversation_id: str) -> SendFrame | CancelFrame:
    """Turn a text frame into a command, or raise FrameError saying what is wrong with it.

    Fields the htmx extension adds (HEADERS and friends) are ignored.
    """
    if raw is None:
        raise FrameError("bad_frame", "Frames must be JSON text.")
    if len(raw) > MAX_FRAME_BYTES:
        raise FrameError("too_large", f"Frames are limited to {MAX_FRAME_BYTES} bytes.")
    try:
        data = json.loads(raw)
    except ValueError:
        raise FrameError("bad_json", "The frame is not valid JSON.") from None
    if not isinstance(data, dict):
        raise FrameError("bad_frame", "The frame must be a JSON object.")
    target = data.get("conversation")
    if target is not None and str(target) != conversation_id:
        raise FrameError("wrong_conversation", "This socket only serves its own conversation.")
    action = data.get("action")
    if action == "cancel":
        return CancelFrame()
    if action != "send":
        raise FrameError("unknown_action", 'The action must be "send" or "cancel".')
    content = data.get("content")
    if not isinstance(content, str):
        raise FrameError("bad_content", "The content must be text.")
    content = content.strip()
    if not content:
        raise FrameError("empty", "Write a message before sending.")
    limit = settings.CHAT_MAX_PROMPT_CHARS
    if len(content) > limit:
        raise FrameError("too_long", f"Messages are limited to {limit} characters.")
    key = data.get("idempotency_key", "")
    if not isinstance(key, str) or len(key) > MAX_IDEMPOTENCY_KEY:
        raise FrameError(
            "bad_idempotency_key",
            f"idempotency_key must be text of at most {MAX_IDEMPOTENCY_KEY} characters.",
        )
    return SendFrame(content=content, idempotency_key=key)

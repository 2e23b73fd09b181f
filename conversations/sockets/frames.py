"""Validation of what a browser or API client sends over the conversation socket."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

from django.conf import settings
from django.utils.translation import gettext as _

from conversations.services.text import storable

MAX_FRAME_BYTES = 64 * 1024
MAX_IDEMPOTENCY_KEY = 64
MAX_MODEL_SLUG = 50
# The longest escape of one character in JSON: an astral character as two \uXXXX escapes.
MAX_JSON_BYTES_PER_CHAR = 12


class FrameError(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class SendFrame:
    content: str
    idempotency_key: str = ""
    model: str = ""  # a model's slug; empty: the conversation's model
    turn: str = "send"  # send, regenerate, retry, edit or continue (see generation.replies.Turn)
    message_id: int | None = None  # edit: the message it is a new version of
    # Files the composer holds for a send (conversations.attachments.uploads), by id.
    attachments: tuple[uuid.UUID, ...] = ()


@dataclass(frozen=True)
class CancelFrame:
    pass


@dataclass(frozen=True)
class SelectFrame:
    """Show the branch through this message (another version of its turn)."""

    message_id: int


# Actions that start a reply; "retry" (after a failure) is a regenerate that takes the place of
# the failed version.
TURNS = {
    "send": "send",
    "regenerate": "regenerate",
    "retry": "retry",
    "edit": "edit",
    "continue": "continue",
}
WITH_CONTENT = {"send", "edit"}


def frame_limit() -> int:
    """Bytes a frame may have: enough for the longest prompt however the client escapes it."""
    return max(MAX_FRAME_BYTES, settings.CHAT_MAX_PROMPT_CHARS * MAX_JSON_BYTES_PER_CHAR + 1024)


def parse_frame(raw: str | None, *, conversation_id: str) -> SendFrame | CancelFrame | SelectFrame:
    """Turn a text frame into a command, or raise FrameError saying what is wrong with it.

    Fields the htmx extension adds (HEADERS and friends) are ignored.
    """
    if raw is None:
        raise FrameError("bad_frame", "Frames must be JSON text.")
    limit = frame_limit()
    # The character count is checked first so a huge frame is never encoded just to measure it.
    if len(raw) > limit or len(raw.encode("utf-8", "surrogatepass")) > limit:
        raise FrameError("too_large", f"Frames are limited to {limit} bytes.")
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):  # deep nesting overflows the parser's stack
        raise FrameError("bad_json", "The frame is not valid JSON.") from None
    if not isinstance(data, dict):
        raise FrameError("bad_frame", "The frame must be a JSON object.")
    target = data.get("conversation")
    if target is not None and not _same_uuid(target, conversation_id):
        raise FrameError("wrong_conversation", "This socket only serves its own conversation.")
    action = data.get("action")
    if action == "cancel":
        return CancelFrame()
    if action == "select":
        return SelectFrame(_message_id(data))
    if not isinstance(action, str) or action not in TURNS:
        raise FrameError(
            "unknown_action",
            "The action must be one of send, cancel, regenerate, retry, edit, continue, select.",
        )
    turn = TURNS[action]
    message_id = _message_id(data) if turn == "edit" else None
    attachments = _attachments(data) if turn == "send" else ()
    content = _content(data, optional=bool(attachments)) if turn in WITH_CONTENT else ""
    # null is what a form serializer sends for "no key"; it means the same as leaving it out.
    key = data.get("idempotency_key")
    if key is None:
        key = ""
    if not isinstance(key, str) or len(key) > MAX_IDEMPOTENCY_KEY or not storable(key):
        raise FrameError(
            "bad_idempotency_key",
            f"idempotency_key must be text of at most {MAX_IDEMPOTENCY_KEY} characters.",
        )
    model = data.get("model")
    if model is None:
        model = ""
    if not isinstance(model, str) or len(model) > MAX_MODEL_SLUG or not storable(model):
        raise FrameError(
            "bad_model", f"model must be a model's name of at most {MAX_MODEL_SLUG} characters."
        )
    return SendFrame(
        content=content,
        idempotency_key=key,
        model=model.strip(),
        turn=turn,
        message_id=message_id,
        attachments=attachments,
    )


def _message_id(data: dict[str, object]) -> int:
    value = data.get("message_id")
    if isinstance(value, str) and value.isdigit():
        value = int(value)  # a form field sends text
    if not isinstance(value, int) or isinstance(value, bool) or not 0 < value < 2**63:
        raise FrameError("bad_message_id", "message_id must be the id of a message.")
    return value


def _attachments(data: dict[str, object]) -> tuple[uuid.UUID, ...]:
    """The composer's attachments: one id as text, several as a list (how a form serializes
    one hidden field or many), none left out."""
    value = data.get("attachments")
    if value is None or value == "":
        return ()
    values = value if isinstance(value, list) else [value]
    most = settings.CHAT_ATTACHMENTS_PER_MESSAGE
    if len(values) > most:
        raise FrameError(
            "too_many_attachments",
            _("A message may carry %(most)d attachments at most.") % {"most": most},
        )
    try:
        ids = tuple(uuid.UUID(item) for item in values if isinstance(item, str))
    except ValueError:
        ids = ()
    if len(ids) != len(values):
        raise FrameError("bad_attachments", "attachments must be the ids of attached files.")
    return tuple(dict.fromkeys(ids))


def _content(data: dict[str, object], *, optional: bool = False) -> str:
    content = data.get("content")
    if not isinstance(content, str):
        raise FrameError("bad_content", "The content must be text.")
    if not storable(content):
        raise FrameError("bad_content", _("The content contains characters that cannot be saved."))
    content = content.strip()
    if not content and not optional:
        raise FrameError("empty", _("Write a message before sending."))
    max_chars = settings.CHAT_MAX_PROMPT_CHARS
    if len(content) > max_chars:
        raise FrameError(
            "too_long",
            _("Messages are limited to %(max)d characters.") % {"max": max_chars},
        )
    return content


def _same_uuid(value: object, conversation_id: str) -> bool:
    try:
        return uuid.UUID(str(value)) == uuid.UUID(conversation_id)
    except ValueError:
        return False

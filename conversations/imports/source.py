"""What every format's reader turns a source conversation into, and the errors they raise.

A reader knows one export format; the service that writes conversations knows none. Between them
is a SourceConversation: a title, the source's id and times, and a tree of messages, each naming
its parent by the source's key. Messages a format has that chatsite does not keep (system
prompts, tool calls, hidden nodes) are counted in `left_out` with the reason, never silently lost.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext_noop

from conversations.services.text import make_storable

# An imported reply its source holds unfinished: its error, stored in English and translated where
# the page shows it (templatetags.chat.interruption). Not the server's own interruption, which
# recovery may still settle.
UNFINISHED_AT_SOURCE = gettext_noop("It was not finished where it was exported from.")


class ImportRefused(Exception):
    """The whole file cannot be imported: nothing of it is written.

    `code` names the problem for API clients; the message says it to a person.
    """

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


class ClientLeft(ImportRefused):
    """The client that sent the file left before the import ended: it stopped there."""

    def __init__(self) -> None:
        super().__init__(
            "client_left", "The import stopped: the client that sent the file is gone."
        )


class ImportLimited(ImportRefused):
    """The user has started CHAT_IMPORTS_PER_HOUR imports this hour; `retry_after` seconds on,
    they may start another."""

    def __init__(self, retry_after: int):
        super().__init__(
            "too_many_imports",
            "You have imported too many files this hour. "
            f"Try again in {max(1, round(retry_after / 60))} minutes.",
        )
        self.retry_after = retry_after


class ConversationRefused(Exception):
    """One conversation of the file cannot be imported (its shape, a limit); the message says
    why to a person. Unless the user chose to keep what parsed, the whole import stops."""


@dataclass
class SourceMessage:
    key: str  # unique within its conversation
    parent_key: str | None
    role: str  # "user" or "assistant"
    content: str
    created_at: datetime | None
    # More Message columns, for a source that has them (chatsite's own exports): model,
    # status, token counts, timings. Checked by the reader.
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass
class SourceConversation:
    external_id: str
    title: str
    created_at: datetime | None
    updated_at: datetime | None
    messages: list[SourceMessage]
    # The last message of the branch shown (readers set it); None: a plain list, shown in
    # order (chatsite's conversations from before branches).
    current_key: str | None = None
    system_prompt: str | None = None
    # More Conversation columns (chatsite's own exports): title_is_custom, model_slug,
    # temperature, max_tokens, pinned, archived, and the name of its project (project_name).
    fields: dict[str, Any] = field(default_factory=dict)
    # Why messages of the source were not kept, and how many for each reason.
    left_out: Counter[str] = field(default_factory=Counter)


# Reasons for left_out, as the report says them.
LEFT_OUT_TOOL = "tool calls and tool results are not imported"
LEFT_OUT_HIDDEN = "hidden in the source (custom instructions, reasoning, tool traffic)"
LEFT_OUT_EMPTY = "no text (attachments and images are not imported)"
LEFT_OUT_SYSTEM = "a second system prompt (the conversation keeps the first)"
LEFT_OUT_ROLE = "a role other than user, assistant or system"


# Python holds the years 1 to 9999 (the database more). A day inside that, a time still shows in
# any time zone (a page's, the admin's) and every page that reads its row can hold it.
EARLIEST_TIME = datetime.min.replace(tzinfo=UTC) + timedelta(days=1)
LATEST_TIME = datetime.max.replace(tzinfo=UTC) - timedelta(days=1)
OUT_OF_RANGE = "out of the range of times chatsite keeps"


def text_of(value: Any, what: str) -> str:
    """A string field of the source, made storable; a missing one is empty."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ConversationRefused(f"{what} is not text.")
    return make_storable(value)


def key_of(value: Any, what: str) -> str:
    """An id of the source as text (some formats use numbers); bounded like external_id."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ConversationRefused(f"{what} is missing or not an id.")
    key = make_storable(str(value)).strip()
    if not key or len(key) > 200:
        raise ConversationRefused(f"{what} is empty or longer than 200 characters.")
    return key


def time_of(value: Any, what: str, *, milliseconds: bool = False) -> datetime | None:
    """A time of the source: seconds since the epoch (ChatGPT, Open WebUI) or ISO 8601 text
    (Claude, chatsite), in the range chatsite keeps (in_range). Missing: None."""
    if value is None or value == "":
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = value / 1000 if milliseconds else value
        if not math.isfinite(seconds) or not 0 <= seconds < 32503680000:  # before year 3000
            raise ConversationRefused(f"{what} is not a time.")
        return datetime.fromtimestamp(seconds, tz=UTC)
    if isinstance(value, str):
        try:
            parsed = parse_datetime(value.strip())
        except ValueError:
            parsed = None
        if parsed is None:
            raise ConversationRefused(f"{what} is not a time: {value[:40]!r}.")
        when = parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
        if not in_range(when):
            raise ConversationRefused(f"{what} is {OUT_OF_RANGE}: {value[:40]!r}.")
        return when
    raise ConversationRefused(f"{what} is not a time.")


def in_range(when: datetime) -> bool:
    """Whether `when` is a time chatsite keeps: one whose UTC is between EARLIEST_TIME and
    LATEST_TIME. A time out of it refuses its conversation, as one that is not a time does:
    a time moved into range would say what the source never did."""
    try:
        return EARLIEST_TIME <= when.astimezone(UTC) <= LATEST_TIME
    except OverflowError:  # valid as written, past the year 9999 (or before the year 1) in UTC
        return False


def as_object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConversationRefused(f"{what} is not a JSON object.")
    return value


def as_list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise ConversationRefused(f"{what} is not a list.")
    return value

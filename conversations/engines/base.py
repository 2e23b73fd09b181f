"""The one interface every engine backend implements.

A backend turns a list of chat messages into a stream of text deltas. The generation service
(`conversations.services.generation`) iterates the stream and, when someone presses Stop, awaits
`stream.stop()`: that call must make the engine itself stop working on the request (not just stop
our loop from reading) and return only once the engine has confirmed it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


class EngineError(Exception):
    """An engine failed; its message is shown to the user, so keep it readable."""


@dataclass(frozen=True)
class ChatMessage:
    role: str  # "system", "user" or "assistant"
    content: str


@dataclass(frozen=True)
class SamplingParams:
    max_tokens: int = 512
    temperature: float = 0.7


@dataclass
class StreamResult:
    """Filled in by the stream as it runs; final once iteration has ended."""

    prompt_tokens: int | None = None
    completion_tokens: int = 0
    finish_reason: str = ""
    # When the engine confirmed it stopped working because of stop(); None if it never was stopped.
    stopped_at: datetime | None = None


class EngineStream(Protocol):
    result: StreamResult

    def __aiter__(self) -> AsyncIterator[str]:
        """Yield text deltas. Ends normally when the reply is done or after stop()."""
        ...

    async def stop(self) -> datetime:
        """Stop the engine's work on this request and return when it confirmed it stopped.

        Safe to call more than once, before the first delta, or after the stream ended.
        """
        ...


class Engine(Protocol):
    name: str
    model: str
    context_tokens: int

    def count_tokens(self, text: str) -> int:
        """How many tokens the text costs in this engine's context window (an estimate is fine)."""
        ...

    def stream(
        self, messages: list[ChatMessage], params: SamplingParams, *, request_id: str
    ) -> EngineStream:
        """Start generating a reply; nothing runs until the stream is iterated."""
        ...


def estimate_tokens(text: str) -> int:
    """A tokenizer-free estimate (about four characters a token) for engines without one."""
    return max(1, len(text) // 4)

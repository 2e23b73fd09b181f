"""The one interface every engine backend implements.

A backend turns a list of chat messages into a stream of text deltas. The generation runner
(`conversations.generation.runner`) iterates the stream and, when someone presses Stop, awaits
`stream.stop()`: that call must make the engine itself stop working on the request (not just stop
our loop from reading) and return once the engine has confirmed it, or give up after
`stop_timeout_s` so a hung engine cannot hold its conversation for good.

`EngineStream` owns the bookkeeping every backend shares (stopped before it started, stopped
twice, stopped after the end, the confirmation time, the timeout); a backend writes two methods:
`_deltas()`, the work, and `_abort()`, the request to end it.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

logger = logging.getLogger("chatsite.engines")

# An engine that has not confirmed a stop by then is logged, and the reply is saved anyway.
ENGINE_STOP_TIMEOUT_S = 10.0


class EngineError(Exception):
    """An engine failed. Its message is shown to the user: keep it readable, and free of what
    only operators should see (server addresses, file paths, setting names), which goes in
    `detail`: logged and shown in the admin (Message.error_detail)."""

    def __init__(self, message: str, *, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail or message


class FinishReason(StrEnum):
    """Why a stream ended, in the words OpenAI-compatible servers and vLLM use."""

    STOP = "stop"  # the model ended its reply
    LENGTH = "length"  # the reply reached max_tokens
    TOOL_CALLS = "tool_calls"  # the model asked for tools to be called (StreamResult.tool_calls)
    ABORT = "abort"  # stop() ended it

    @property
    def is_natural(self) -> bool:
        """The model finished by itself: a Stop that arrives now stopped nothing."""
        return self in (FinishReason.STOP, FinishReason.LENGTH, FinishReason.TOOL_CALLS)

    @classmethod
    def parse(cls, value: object) -> FinishReason | None:
        """An engine's own finish reason; unknown ones (vLLM's "error") read as None."""
        try:
            return cls(str(value))
        except ValueError:
            return None


@dataclass(frozen=True)
class ToolCall:
    """A function the model asks the caller to run: its call id, the tool's name and the
    arguments as the model wrote them (JSON text, which the model may get wrong: passed on as
    written, for the caller to judge, as OpenAI's API does)."""

    id: str
    name: str
    arguments: str

    def openai(self) -> dict[str, Any]:
        """The call in OpenAI's shape (an assistant message's `tool_calls` item)."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }

    @classmethod
    def from_openai(cls, item: dict[str, Any]) -> ToolCall:
        function = item["function"]
        return cls(str(item["id"]), str(function["name"]), str(function["arguments"]))


@dataclass(frozen=True)
class ChatMessage:
    role: str  # "system", "user", "assistant" or "tool"
    content: str
    # Images attached to a user message, as data: URLs, for a model with `vision` (the text of
    # other attachments is in `content`).
    images: tuple[str, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()  # an assistant message's calls
    tool_call_id: str = ""  # a tool message: the call it answers

    def openai_content(self) -> str | list[dict[str, Any]]:
        """The content as OpenAI's chat API takes it: the text, or with images, a text part
        followed by an image_url part for each."""
        if not self.images:
            return self.content
        parts: list[dict[str, Any]] = [{"type": "text", "text": self.content}]
        parts += [{"type": "image_url", "image_url": {"url": url}} for url in self.images]
        return parts

    def openai_message(self) -> dict[str, Any]:
        """The whole message as OpenAI's chat API takes it, tool calls and results included."""
        message: dict[str, Any] = {"role": self.role, "content": self.openai_content()}
        if self.tool_calls:
            message["tool_calls"] = [call.openai() for call in self.tool_calls]
            message["content"] = self.content or None
        if self.role == "tool":
            message["tool_call_id"] = self.tool_call_id
        return message


@dataclass(frozen=True)
class SamplingParams:
    max_tokens: int = 512
    temperature: float = 0.7
    # The last message is the assistant's, cut off: write on from its end, not a new reply.
    continue_final: bool = False
    # What an API caller may ask for too (the OpenAI-compatible gateway). Unset, each engine keeps
    # its own default; every backend passes them on to its engine.
    top_p: float | None = None
    stop: tuple[str, ...] = ()  # the reply ends before the first of these (finish reason "stop")
    seed: int | None = None
    # The functions the model may call, in OpenAI's shape (`{"type": "function", "function":
    # {...}}`), and which it must ("auto", "none", "required" or one named); only for an engine
    # of a model with `tools` (specs.ModelSpec.tools).
    tools: tuple[dict[str, Any], ...] = ()
    tool_choice: str | dict[str, Any] | None = None

    def extras(self) -> dict[str, Any]:
        """top_p, stop and seed as keyword arguments, only those that are set: an engine's own
        defaults stand for the others."""
        chosen: dict[str, Any] = {"top_p": self.top_p, "seed": self.seed}
        chosen = {name: value for name, value in chosen.items() if value is not None}
        if self.stop:
            chosen["stop"] = list(self.stop)
        return chosen


# The largest token count a reply's row holds (PostgreSQL's integer): an engine that reports
# more is wrong, whatever it meant.
MAX_TOKEN_COUNT = 2**31 - 1


def token_count(value: object) -> int | None:
    """A token count an engine reported, or None if it is not one: a whole number from 0 to
    MAX_TOKEN_COUNT (JSON's true, 1.5, "7" and -1 are none)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKEN_COUNT:
        return value
    return None


@dataclass
class StreamResult:
    """Filled in by the stream as it runs; final once iteration has ended. Its counts are ones a
    row holds: a backend takes what its engine reports through token_count."""

    prompt_tokens: int | None = None
    completion_tokens: int = 0
    finish_reason: FinishReason | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)  # finish reason "tool_calls"
    # When the engine confirmed it stopped working because of stop(); None if it never was stopped.
    stopped_at: datetime | None = None


@dataclass
class _StopState:
    requested: bool = False
    started: bool = False  # iteration began: there is engine work to stop
    done: asyncio.Event = field(default_factory=asyncio.Event)


class EngineStream(ABC):
    """One reply being generated. Iterate it for text deltas; stop() ends it early."""

    stop_timeout_s: float = ENGINE_STOP_TIMEOUT_S

    def __init__(self, *, prompt_tokens: int | None = None) -> None:
        self.result = StreamResult(prompt_tokens=prompt_tokens)
        self._stop = _StopState()

    @property
    def stop_requested(self) -> bool:
        return self._stop.requested

    @property
    def waiting_in_queue(self) -> bool:
        """True while the reply waits for the engine behind others: waiting, not stalled."""
        return False

    async def __aiter__(self) -> AsyncGenerator[str, None]:
        """Yield text deltas. Ends normally when the reply is done or after stop()."""
        if self._stop.requested:
            return  # stopped before it started: the engine never saw it
        self._stop.started = True
        try:
            # aclosing: a reader that goes away ends the backend's work now, not at garbage
            # collection.
            async with aclosing(self._deltas()) as deltas:
                async for delta in deltas:
                    yield delta
        finally:
            if self._stop.requested:
                self._engine_stopped()
            self._stop.done.set()

    async def stop(self) -> datetime | None:
        """Stop the engine's work on this request; return when it confirmed it stopped.

        None if the engine did not confirm within stop_timeout_s (logged). Safe to call more than
        once, before the first delta, or after the stream ended.
        """
        first = not self._stop.requested
        self._stop.requested = True
        if not self._stop.started:
            self._stop.done.set()  # nothing was running: confirmed now
        try:
            async with asyncio.timeout(self.stop_timeout_s):
                if first and not self._stop.done.is_set():
                    try:
                        await self._abort()
                    except Exception:
                        # The stream may still end by itself (and the wait below is bounded).
                        logger.exception("the engine failed to abort a request")
                await self._stop.done.wait()
        except TimeoutError:
            logger.error("the engine did not confirm a stop within %gs", self.stop_timeout_s)
            return None
        self._engine_stopped()
        # A stream that had ended by itself has nothing to stop: that is confirmed at once.
        return self.result.stopped_at or datetime.now(UTC)

    def _engine_stopped(self) -> None:
        """The engine has let go of this request after stop(): stop() may return now, even if
        nobody reads the stream on. Backends that learn this other than by `_deltas()` ending
        (a worker thread that returned, a closed connection) call it from `_abort()`."""
        if self.result.finish_reason is None:
            self.result.finish_reason = FinishReason.ABORT
        # A reply that ended by itself as the stop arrived keeps its reason, and no stop time.
        if self.result.finish_reason is FinishReason.ABORT and self.result.stopped_at is None:
            self.result.stopped_at = datetime.now(UTC)
        self._stop.done.set()

    @abstractmethod
    def _deltas(self) -> AsyncGenerator[str, None]:
        """The backend's work: yield text deltas, set result fields, end soon after _abort()."""

    @abstractmethod
    async def _abort(self) -> None:
        """Ask the engine to stop working on this request; iteration must then end soon.

        Called once, only while the stream runs. The stop is confirmed when `_deltas()` ends, or
        earlier where the backend calls `_engine_stopped()`.
        """


class Engine(Protocol):
    name: str
    model: str
    context_tokens: int

    def load(self) -> None:
        """Load the model and start whatever serves it; slow, and blocking. Called once per
        process, on a thread of its own (never the event loop), before any stream is created."""
        ...

    def close(self) -> None:
        """Let go of the model and of any process the engine started (at process exit)."""
        ...

    def count_tokens(self, text: str) -> int:
        """How many tokens the text costs in this engine's context window (an estimate is fine).
        It may block (on a tokenizer, or a request to the model's server): never call it on the
        event loop."""
        ...

    def stream(
        self,
        messages: list[ChatMessage],
        params: SamplingParams,
        *,
        request_id: str,
        prompt_tokens: int | None = None,
    ) -> EngineStream:
        """Start generating a reply; nothing runs until the stream is iterated, and neither
        building nor reading the stream blocks the event loop.

        `prompt_tokens`: what the messages cost, as the caller counted them with count_tokens
        off the event loop (where it fitted them to the context); the result reports it unless
        the engine counts the prompt itself, and None when the caller did not count (titles).
        """
        ...


@runtime_checkable
class RemoteEngine(Protocol):
    """An engine whose model another server holds: loaded says nothing about that server."""

    async def unreachable(self) -> str | None:
        """Why the server cannot be reached now (a readiness probe); None if it answers."""
        ...


def counts_exactly(engine: Engine) -> bool:
    """Whether the engine's count_tokens asks the model's own tokenizer, not estimate_tokens: an
    engine that can says so with an `exact_counts` attribute (most estimate, and need none)."""
    return bool(getattr(engine, "exact_counts", False))


def estimate_tokens(text: str) -> int:
    """A tokenizer-free estimate (about four characters a token) for engines without one."""
    return max(1, len(text) // 4)

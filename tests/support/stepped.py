"""An engine the test drives: each token is emitted when the test says so.

Tests use it instead of sleeps and timing: `stream = await engine.next_stream()`, then
`stream.emit("text")`, `stream.end()`, `stream.fail(...)`; `stream.abort_requested` tells whether
the generation asked the engine to stop. `hangs=True` makes an engine that never confirms a stop.
Selected with the `stepped_engine` fixture (tests/conftest.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from conversations.engines.base import (
    ChatMessage,
    EngineStream,
    FinishReason,
    SamplingParams,
    estimate_tokens,
)
from conversations.engines.specs import ModelSpec

_ABORTED = object()


class SteppedStream(EngineStream):
    def __init__(
        self,
        engine: SteppedEngine,
        messages: list[ChatMessage],
        request_id: str,
        prompt_tokens: int | None,
    ):
        super().__init__(prompt_tokens=prompt_tokens)
        self.engine = engine
        self.messages = messages
        self.request_id = request_id
        self.stop_timeout_s = engine.stop_timeout_s
        self.abort_requested = asyncio.Event()
        self.tokens_after_abort = 0
        self._script: asyncio.Queue[object] = asyncio.Queue()

    def emit(self, text: str, *, finish: FinishReason | None = None) -> None:
        """The engine produces `text`; with `finish`, the engine says this was the last token."""
        self._script.put_nowait((text, finish))

    def end(self, reason: FinishReason = FinishReason.STOP) -> None:
        self._script.put_nowait(reason)

    def fail(self, error: Exception) -> None:
        self._script.put_nowait(error)

    async def _deltas(self) -> AsyncIterator[str]:
        self.engine.started.put_nowait(self)
        while True:
            item = await self._script.get()
            if item is _ABORTED:
                return
            if isinstance(item, FinishReason):
                self.result.finish_reason = item
                return
            if isinstance(item, Exception):
                raise item
            assert isinstance(item, tuple)
            text, finish = item
            if self.abort_requested.is_set():
                self.tokens_after_abort += 1
            self.result.completion_tokens += 1
            if finish is not None:
                self.result.finish_reason = finish
            yield text

    async def _abort(self) -> None:
        self.abort_requested.set()
        if not self.engine.hangs:
            self._script.put_nowait(_ABORTED)


class SteppedEngine:
    name = "stepped"
    model = "stepped"
    context_tokens = 100_000

    def __init__(self) -> None:
        self.hangs = False
        self.stop_timeout_s = 5.0
        self.started: asyncio.Queue[SteppedStream] = asyncio.Queue()

    def load(self) -> None:
        pass

    def close(self) -> None:
        pass

    def count_tokens(self, text: str) -> int:
        return estimate_tokens(text)

    def stream(
        self,
        messages: list[ChatMessage],
        params: SamplingParams,
        *,
        request_id: str,
        prompt_tokens: int | None = None,
    ) -> SteppedStream:
        return SteppedStream(self, messages, request_id, prompt_tokens)

    async def next_stream(self, timeout: float = 10) -> SteppedStream:
        """The next stream the generation started iterating."""
        async with asyncio.timeout(timeout):
            return await self.started.get()


def build_engine(spec: ModelSpec) -> SteppedEngine:
    return SteppedEngine()

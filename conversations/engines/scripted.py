"""A deterministic engine for tests and benchmarks.

It emits CHAT_SCRIPTED_TOKENS tokens, one every CHAT_SCRIPTED_DELAY_MS, and records for each
request when it was told to stop and how many tokens it produced after that, so tests can check
that Stop really reached the engine. Stop sequences end a reply as a server's do; top_p and seed
are recorded with the request (its reply is the same whatever they are).

Given tools (a model with `tools`), it calls one as a tool-calling model does: asked a question,
it answers with a call of the tool `tool_choice` names (else the first) whose arguments hold
the question; given the tool's result, it answers with the result's words.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings

from conversations.engines.base import (
    ChatMessage,
    EngineError,
    EngineStream,
    FinishReason,
    SamplingParams,
    ToolCall,
    estimate_tokens,
)
from conversations.engines.specs import ModelSpec

WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel")


def scripted_token(index: int) -> str:
    """The index-th token of every scripted reply (the same for every request)."""
    return f"{WORDS[index % len(WORDS)]}{index} "


@dataclass
class ScriptedRecord:
    """What the engine did for one request, as the engine saw it."""

    request_id: str
    # What it was asked: the prompt (system prompt first) and the sampling settings.
    messages: list[ChatMessage] = field(default_factory=list)
    params: SamplingParams = field(default_factory=SamplingParams)
    requested_at: float = field(default_factory=time.time)  # when the request reached the engine
    emitted: int = 0
    emit_times: list[float] = field(default_factory=list)  # time.time() of each token
    stop_requested_at: float | None = None
    emitted_after_stop: int = 0
    finished: bool = False


class ScriptedStream(EngineStream):
    def __init__(
        self,
        engine: ScriptedEngine,
        messages: list[ChatMessage],
        params: SamplingParams,
        request_id: str,
        prompt_tokens: int | None,
    ) -> None:
        super().__init__(prompt_tokens=prompt_tokens)
        self.engine = engine
        self.record = ScriptedRecord(request_id=request_id, messages=messages, params=params)
        engine.records[request_id] = self.record
        self._max_tokens = params.max_tokens
        self._stops = [stop for stop in params.stop if stop]
        self._text = ""  # written so far, where a stop sequence may end across tokens
        self._halt = asyncio.Event()

    async def _deltas(self) -> AsyncGenerator[str, None]:
        try:
            fail_on = self.engine.fail_on
            if fail_on and any(fail_on in m.content for m in self.record.messages):
                raise EngineError("The scripted engine failed on purpose.")
            if (call := self._tool_call()) is not None:
                self.record.emitted += 1
                self.result.completion_tokens += 1
                self.result.tool_calls = [call]
                self.result.finish_reason = FinishReason.TOOL_CALLS
                return
            script = self._echoed() if self.engine.echo or self._answers_a_tool() else None
            total = min(self.engine.tokens if script is None else len(script), self._max_tokens)
            for index in range(total):
                if self.engine.fail_after is not None and index == self.engine.fail_after:
                    raise EngineError("The scripted engine failed on purpose.")
                if index and self.engine.delay_s:
                    # Waiting on the halt event rather than sleeping makes Stop take effect
                    # at once instead of after the current token's delay.
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._halt.wait(), self.engine.delay_s)
                if self._halt.is_set():
                    self.result.finish_reason = FinishReason.ABORT
                    return
                if self.record.stop_requested_at is not None:
                    self.record.emitted_after_stop += 1
                self.record.emitted += 1
                self.record.emit_times.append(time.time())
                self.result.completion_tokens += 1
                token = scripted_token(index) if script is None else script[index]
                token, stopped = self._until_stop_sequence(token)
                if token:
                    yield token
                if stopped:
                    self.result.finish_reason = FinishReason.STOP
                    return
            natural = FinishReason.LENGTH if total == self._max_tokens else FinishReason.STOP
            self.result.finish_reason = natural
        finally:
            self.record.finished = True

    def _tool_call(self) -> ToolCall | None:
        """The call a tool-calling model makes of a question, if it is given tools to use."""
        params, last = self.record.params, self.record.messages[-1:]
        if not params.tools or params.tool_choice == "none" or not last:
            return None
        if last[0].role != "user":
            return None
        named = params.tool_choice if isinstance(params.tool_choice, dict) else None
        name = (named or params.tools[0])["function"]["name"]
        arguments = json.dumps({"query": last[0].content})
        return ToolCall(f"call_{self.record.request_id[:24]}", name, arguments)

    def _answers_a_tool(self) -> bool:
        return bool(self.record.messages) and self.record.messages[-1].role == "tool"

    def _echoed(self) -> list[str]:
        """An echoing engine's reply: the last user message's words, and its images counted,
        so that a test served by another process reads what the prompt held; after a tool's
        result, that result's words."""
        if self._answers_a_tool():
            return [f"{word} " for word in self.record.messages[-1].content.split()]
        asked = next((m for m in reversed(self.record.messages) if m.role == "user"), None)
        if asked is None:
            return []
        words = [f"{word} " for word in asked.content.split()]
        if asked.images:
            words.append(f"[{len(asked.images)} image(s)] ")
        return words

    def _until_stop_sequence(self, token: str) -> tuple[str, bool]:
        """The token, cut before the first stop sequence it completes (the sequence itself is
        not sent, as servers do; the start of one that began in an earlier token was sent with
        it, since this engine holds nothing back); True if one ended the reply."""
        before = len(self._text)
        self._text += token
        ends = [
            found
            for stop in self._stops
            if (found := self._text.find(stop, max(0, before - len(stop) + 1))) >= 0
        ]
        if not ends:
            return token, False
        return self._text[before : max(before, min(ends))], True

    async def _abort(self) -> None:
        self._halt.set()

    async def stop(self) -> datetime | None:
        # Noted for every stop(), also one that finds nothing running (before the start, or
        # after a stall timeout already cancelled the read), so tests see that Stop was sent.
        if self.record.stop_requested_at is None:
            self.record.stop_requested_at = time.time()
        return await super().stop()


class ScriptedEngine:
    name = "scripted"
    context_tokens = 1_000_000

    def __init__(self, tokens: int, delay_ms: float, *, model: str = "scripted") -> None:
        self.model = model
        self.tokens = tokens
        self.delay_s = delay_ms / 1000
        self.fail_after: int | None = None
        self.fail_on: str | None = None  # a request whose prompt holds this text fails at once
        self.echo = False  # reply with the last user message's words instead of the script
        self.load_s = 0.0
        self.records: dict[str, ScriptedRecord] = {}

    def load(self) -> None:
        """Nothing to load; tests may set `load_s` to stand for a slow model load."""
        time.sleep(self.load_s)

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
    ) -> ScriptedStream:
        return ScriptedStream(self, messages, params, request_id, prompt_tokens)


def build_engine(spec: ModelSpec) -> ScriptedEngine:
    """options: `tokens` and `delay_ms` (default: CHAT_SCRIPTED_TOKENS, CHAT_SCRIPTED_DELAY_MS),
    `load_s`: how long its "model" takes to load (to show and test a slow start), `fail_after`:
    every reply fails after that many tokens (to test failures in a server of its own), `echo`:
    every reply repeats the last user message's words (to read a prompt from another process),
    `context_tokens`: its context window (a million tokens unless set)."""
    engine = ScriptedEngine(
        spec.option("tokens", settings.CHAT_SCRIPTED_TOKENS),
        spec.option("delay_ms", settings.CHAT_SCRIPTED_DELAY_MS),
        model=spec.model_id or "scripted",
    )
    engine.load_s = float(spec.option("load_s", 0.0))
    engine.fail_after = spec.option("fail_after", None)
    engine.echo = bool(spec.option("echo", False))
    # Its context is as large as a test needs: a million tokens unless it asks for fewer.
    engine.context_tokens = int(spec.option("context_tokens", ScriptedEngine.context_tokens))
    return engine

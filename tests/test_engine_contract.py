"""The engine contract, run against every backend.

Each backend must: stream deltas for a chat; on stop() end its own work (checked at the engine's
side, not just in our loop) and confirm it; keep two concurrent streams apart; turn a failure
into EngineError instead of hanging. Backends: scripted; llamacpp (the real SmolLM2); openai
against llama.cpp's real OpenAI-compatible server; vllm against the stand-in in fake_vllm.

BOUND only keeps a broken backend from hanging the suite; it is no speed requirement.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

import pytest

from conversations.engines import get_engine, reset_engines
from conversations.engines.base import (
    ChatMessage,
    Engine,
    EngineError,
    EngineStream,
    SamplingParams,
)
from conversations.engines.openai import OpenAIEngine
from conversations.engines.vllm import VllmEngine
from tests import fake_vllm
from tests.llama_server import shared_server, stop_shared_server

BOUND = 20.0
CHAT = [
    ChatMessage("system", "You are a helpful assistant."),
    ChatMessage("user", "Tell me a long story about a lighthouse keeper."),
]
# More tokens than SmolLM2's 2048-token context: llama.cpp refuses it.
TOO_LONG = [ChatMessage("user", "word " * 3000)]


@dataclass
class Harness:
    engine: Engine
    long: SamplingParams  # a reply long enough to be stopped in the middle
    short: SamplingParams
    # Called right before stop(); what it returns is handed to work_ended.
    before_stop: Callable[[EngineStream], Any]
    # Asserts, at the engine's side, that the stream's work has ended (may wait for it).
    work_ended: Callable[[EngineStream, Any], Awaitable[None]]
    # A stream the engine will fail.
    failing: Callable[[], EngineStream]


def _scripted(settings: Any) -> Harness:
    settings.CHAT_SCRIPTED_TOKENS = 400
    settings.CHAT_SCRIPTED_DELAY_MS = 5
    reset_engines()
    engine: Any = get_engine("scripted")

    async def work_ended(stream: Any, _: Any) -> None:
        record = engine.records[stream.record.request_id]
        assert record.finished
        assert record.emitted_after_stop == 0

    def failing() -> EngineStream:
        engine.fail_after = 2
        return engine.stream(CHAT, SamplingParams(max_tokens=50), request_id="fail")

    return Harness(
        engine,
        SamplingParams(max_tokens=400),
        SamplingParams(max_tokens=12),
        lambda stream: None,
        work_ended,
        failing,
    )


def _llamacpp(settings: Any) -> Harness:
    settings.CHAT_CONTEXT_TOKENS = 2048
    reset_engines()
    engine: Any = get_engine("llamacpp")

    async def work_ended(stream: Any, _: Any) -> None:
        # The model's one worker thread runs this no-op only once the native loop has let go.
        await asyncio.wrap_future(engine.executor.submit(lambda: None))
        assert stream._job.done()

    return Harness(
        engine,
        SamplingParams(max_tokens=300, temperature=0.0),
        SamplingParams(max_tokens=12, temperature=0.0),
        lambda stream: None,
        work_ended,
        lambda: engine.stream(TOO_LONG, SamplingParams(max_tokens=8), request_id="fail"),
    )


def _openai(settings: Any) -> Harness:
    server = shared_server()
    engine = OpenAIEngine(
        base_url=server.base_url, api_key="", model="smollm2", timeout=30, context_tokens=2048
    )

    async def work_ended(stream: Any, disconnects_before: int) -> None:
        # The server logs that the client left mid-stream...
        while server.disconnects() <= disconnects_before:  # noqa: ASYNC110 (a log file, no event)
            await asyncio.sleep(0.05)
        # ...and stops computing: its CPU use falls to (nearly) nothing. The window is only
        # sampled; how long it takes to get there is not asserted.
        while True:
            before = server.cpu_seconds()
            await asyncio.sleep(0.3)
            if server.cpu_seconds() - before < 0.05:
                return

    return Harness(
        engine,
        SamplingParams(max_tokens=300, temperature=0.0),
        SamplingParams(max_tokens=12, temperature=0.0),
        lambda stream: server.disconnects(),
        work_ended,
        lambda: engine.stream(TOO_LONG, SamplingParams(max_tokens=8), request_id="fail"),
    )


def _vllm(settings: Any) -> Harness:
    llm_class = type("AsyncLLM", (fake_vllm.AsyncLLM,), {"reply_tokens": 30, "step_s": 0.005})
    engine = VllmEngine(
        model="Qwen/Qwen2.5-0.5B-Instruct",
        tensor_parallel_size=1,
        max_model_len=4096,
        gpu_memory_utilization=0.9,
        api=fake_vllm.api(llm_class),
    )

    async def work_ended(stream: Any, _: Any) -> None:
        request = engine.llm().requests[stream.request_id]
        assert request.left_scheduler_at is not None, "still scheduled on the GPU"
        assert request.finish_reason == "abort"
        assert request.produced_after_abort == 0
        assert engine.llm().num_requests_running == 0

    def failing() -> EngineStream:
        engine.llm().fail_after = 2
        return engine.stream(CHAT, SamplingParams(max_tokens=50), request_id="fail")

    return Harness(
        engine,
        SamplingParams(max_tokens=400),
        SamplingParams(max_tokens=12),
        lambda stream: None,
        work_ended,
        failing,
    )


BACKENDS = {"scripted": _scripted, "llamacpp": _llamacpp, "openai": _openai, "vllm": _vllm}


@pytest.fixture(
    params=[
        "scripted",
        pytest.param("llamacpp", marks=pytest.mark.model),
        pytest.param("openai", marks=pytest.mark.model),
        "vllm",
    ]
)
def harness(request: Any, settings: Any) -> Harness:
    return BACKENDS[request.param](settings)


@pytest.fixture(scope="session", autouse=True)
def _stop_llama_server() -> Any:
    yield
    stop_shared_server()


async def collect(stream: EngineStream) -> str:
    async with aclosing(aiter(stream)) as deltas:  # type: ignore[type-var]
        return "".join([delta async for delta in deltas])


async def test_it_streams_deltas_for_a_chat(harness: Harness) -> None:
    stream = harness.engine.stream(CHAT, harness.short, request_id="hello")
    deltas: list[str] = []
    async with asyncio.timeout(BOUND), aclosing(aiter(stream)) as chunks:  # type: ignore[type-var]
        async for delta in chunks:
            deltas.append(delta)

    assert len(deltas) > 1, "the reply arrives in pieces, not at once"
    assert "".join(deltas).strip()
    assert stream.result.finish_reason in ("stop", "length")
    assert 0 < stream.result.completion_tokens <= harness.short.max_tokens
    assert stream.result.stopped_at is None


async def test_it_stops_the_engines_work_mid_stream(harness: Harness) -> None:
    stream = harness.engine.stream(CHAT, harness.long, request_id="stop-me")
    deltas: list[str] = []
    two_deltas = asyncio.Event()

    async def read() -> None:
        # Like the generation service: one task reads, another presses Stop.
        async with aclosing(aiter(stream)) as chunks:  # type: ignore[type-var]
            async for delta in chunks:
                deltas.append(delta)
                if len(deltas) == 2:
                    two_deltas.set()

    reader = asyncio.create_task(read())
    async with asyncio.timeout(BOUND):
        await two_deltas.wait()
    state = harness.before_stop(stream)
    async with asyncio.timeout(BOUND):
        confirmed_at = await stream.stop()
        await reader  # our side of the stream ends too

    assert stream.result.finish_reason == "abort"
    assert stream.result.stopped_at == confirmed_at
    assert stream.result.completion_tokens < harness.long.max_tokens
    async with asyncio.timeout(BOUND):
        await harness.work_ended(stream, state)
    assert await stream.stop() == confirmed_at, "a second stop() is harmless"


async def test_it_accepts_stop_before_the_stream_starts(harness: Harness) -> None:
    stream = harness.engine.stream(CHAT, harness.short, request_id="never")
    async with asyncio.timeout(BOUND):
        await stream.stop()
        assert await collect(stream) == ""
    assert stream.result.stopped_at is not None


async def test_it_keeps_two_concurrent_streams_apart(harness: Harness) -> None:
    # Same chat, greedy sampling: any mixing of the two streams would make the texts differ.
    # (llamacpp serves one reply at a time: the second waits, then runs.)
    params = SamplingParams(max_tokens=harness.short.max_tokens, temperature=0.0)
    first = harness.engine.stream(CHAT, params, request_id="first")
    second = harness.engine.stream(CHAT, params, request_id="second")
    async with asyncio.timeout(BOUND * 2):
        text_1, text_2 = await asyncio.gather(collect(first), collect(second))

    assert text_1.strip()
    assert text_1 == text_2
    for stream in (first, second):
        assert stream.result.finish_reason in ("stop", "length")


async def test_it_stops_one_stream_and_the_other_goes_on(harness: Harness) -> None:
    stopped = harness.engine.stream(CHAT, harness.long, request_id="stopped")
    other = harness.engine.stream(CHAT, harness.short, request_id="other")
    first_delta = asyncio.Event()

    async def read_stopped() -> None:
        async with aclosing(aiter(stopped)) as chunks:  # type: ignore[type-var]
            async for _ in chunks:
                first_delta.set()

    stopped_task = asyncio.create_task(read_stopped())
    await asyncio.sleep(0)  # `stopped` asks the engine first (llamacpp queues `other` behind it)
    other_task = asyncio.create_task(collect(other))
    async with asyncio.timeout(BOUND):
        await first_delta.wait()
        await stopped.stop()
        await stopped_task
    async with asyncio.timeout(BOUND * 2):
        other_text = await other_task

    assert stopped.result.finish_reason == "abort"
    assert other_text.strip()
    assert other.result.finish_reason in ("stop", "length")


async def test_it_turns_an_engine_failure_into_an_error(harness: Harness) -> None:
    stream = harness.failing()
    with pytest.raises(EngineError) as failure:
        async with asyncio.timeout(BOUND):
            await collect(stream)
    assert str(failure.value).strip(), "the user is told something readable"

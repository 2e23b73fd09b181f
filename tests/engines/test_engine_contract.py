"""The engine contract, run against every backend.

Each backend must: stream deltas for a chat; on stop() end its own work (checked at the engine's
side, not just in our loop) and confirm it; end that work too when the reader closes the stream;
keep two concurrent streams apart; turn a failure into EngineError instead of hanging; hold the
event loop neither while the stream is built nor while it is read (every callback that holds it
past HELD_S is reported), the prompt's tokens being counted, off the loop, where the
prompt is built. Backends:
scripted; llamacpp (the real SmolLM2) on each of its two llama.cpp bindings (llamacpp_bindings.py);
openai against llama.cpp's real OpenAI-compatible server;
vllm against the stand-in in fake_vllm. The shared stop() bookkeeping (EngineStream) is checked
once more against a hung engine: a stop that is never confirmed gives up after stop_timeout_s.

BOUND only keeps a broken backend from hanging the suite; it is no speed requirement.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import gc
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from conversations.engines import check_engine_setting, get_engine, reset_engines
from conversations.engines.base import (
    ChatMessage,
    Engine,
    EngineError,
    EngineStream,
    FinishReason,
    SamplingParams,
)
from conversations.engines.llamacpp_bindings import BINDINGS, load_model
from conversations.engines.openai import OpenAIEngine
from conversations.engines.scripted import ScriptedEngine, ScriptedStream
from conversations.engines.specs import ReplySettings
from conversations.engines.vllm import VllmEngine
from conversations.services.prompt import build_prompt
from tests.support import fake_vllm
from tests.support.llama_server import shared_server, stop_shared_server

BOUND = 20.0
# A callback that runs this long holds the event loop: every other reply, socket and page waits.
# In normal runs on a loaded two-core machine the longest are about 25 ms (the GIL shared with an
# engine's worker thread; time the OS gave the core to another process is not counted); counting LONG_CHAT's tokens through xllamacpp's
# loopback HTTP endpoint on the loop held it for 120 to 330 ms.
HELD_S = 0.05
CHAT = [
    ChatMessage("system", "You are a helpful assistant."),
    ChatMessage("user", "Tell me a long story about a lighthouse keeper."),
]
# More tokens than SmolLM2's 2048-token context: llama.cpp refuses it.
TOO_LONG = [ChatMessage("user", "word " * 3000)]
# A long conversation of short turns, within SmolLM2's context (about 1,800 tokens): work per
# message on the event loop (counting its tokens, say) adds up to a loop held for a while.
LONG_CHAT = [
    ChatMessage("system", "You are a helpful assistant."),
    *(ChatMessage("user" if turn % 2 == 0 else "assistant", "Yes.") for turn in range(240)),
    ChatMessage("user", "Tell me a story about a lighthouse keeper."),
]


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
    # Whether the engine behind it samples as SamplingParams asks (stop sequences, a seed): every
    # real engine does; the fake vLLM does not model sampling (the vLLM tier runs the real one).
    samples: bool = True


def _scripted(settings: Any) -> Harness:
    settings.CHAT_SCRIPTED_TOKENS = 400
    settings.CHAT_SCRIPTED_DELAY_MS = 5
    reset_engines()
    engine = get_engine("scripted")
    assert isinstance(engine, ScriptedEngine)

    async def work_ended(stream: EngineStream, _: object) -> None:
        assert isinstance(stream, ScriptedStream)
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


def _llamacpp(settings: Any, binding: str) -> Harness:
    pytest.importorskip(BINDINGS[binding].module)
    settings.CHAT_CONTEXT_TOKENS = 2048
    settings.CHAT_LLAMA_BINDING = binding
    reset_engines()
    engine: Any = get_engine("llamacpp")

    async def work_ended(stream: Any, tokens_before_stop: int) -> None:
        # The model's one worker thread runs this no-op once the native loop has let go...
        await asyncio.wrap_future(engine.executor.submit(lambda: None))
        # ...and the worker counts every token it generates, read or not: had it gone on for
        # nobody, the count would have run on to the end of the reply.
        assert stream.result.completion_tokens <= tokens_before_stop + 2

    return Harness(
        engine,
        SamplingParams(max_tokens=300, temperature=0.0),
        SamplingParams(max_tokens=12, temperature=0.0),
        lambda stream: stream.result.completion_tokens,
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
        samples=False,
    )


BACKENDS = {
    "scripted": _scripted,
    "llamacpp": functools.partial(_llamacpp, binding="xllamacpp"),
    "llamacpp-python": functools.partial(_llamacpp, binding="llama-cpp-python"),
    "openai": _openai,
    "vllm": _vllm,
}


@pytest.fixture(
    params=[
        "scripted",
        pytest.param("llamacpp", marks=pytest.mark.model),
        pytest.param("llamacpp-python", marks=pytest.mark.model),
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
    async with aclosing(aiter(stream)) as deltas:
        return "".join([delta async for delta in deltas])


def _time_waiting_for_a_core() -> float:
    """Seconds this thread has spent runnable but not running, since it started: the time the
    OS gave its core to another process (Linux's schedstat; 0 where there is none)."""
    try:
        with open("/proc/thread-self/schedstat") as stats:
            return int(stats.read().split()[1]) / 1e9
    except OSError:
        return 0.0


@asynccontextmanager
async def slow_callbacks(threshold_s: float) -> AsyncIterator[list[str]]:
    """While the block runs, every callback (a task's step, a handle) that holds the running
    loop for `threshold_s` or longer is listed. Held is the callback's wall time less the time
    its thread sat waiting for a core: on a two-core machine shared with an engine's own
    processes, the OS preempting the test process is no callback's doing. Blocking I/O, a lock
    or the GIL waited on, and work done all count."""
    held: list[str] = []
    run = asyncio.events.Handle._run

    def timed_run(handle: asyncio.Handle) -> None:
        started, waited = time.perf_counter(), _time_waiting_for_a_core()
        try:
            run(handle)
        finally:
            seconds = time.perf_counter() - started - (_time_waiting_for_a_core() - waited)
            if seconds >= threshold_s:
                callback = handle._callback  # type: ignore[attr-defined]
                held.append(f"{seconds:.3f} s: {getattr(callback, '__self__', callback)}")

    # A collection of the test process's large heap can take tens of milliseconds, in whichever
    # callback it falls: no engine's doing. Collected now, and not again until the block ends.
    was_collecting = gc.isenabled()
    gc.collect()
    gc.disable()
    asyncio.events.Handle._run = timed_run  # type: ignore[method-assign]
    try:
        await asyncio.sleep(0)  # timed from the next callback on
        yield held
        await asyncio.sleep(0)  # the block's last callback is timed while its report is taken
    finally:
        asyncio.events.Handle._run = run  # type: ignore[method-assign]
        if was_collecting:
            gc.enable()


async def test_building_and_reading_a_stream_never_blocks_the_loop(harness: Harness) -> None:
    await asyncio.to_thread(harness.engine.load)  # as the registry does, before any stream
    async with slow_callbacks(HELD_S) as held:
        # Built from many messages; stopped before it starts, so the engine never runs it.
        long = harness.engine.stream(LONG_CHAT, harness.short, request_id="long")
        await long.stop()
        stream = harness.engine.stream(CHAT, harness.short, request_id="read")
        async with asyncio.timeout(BOUND):
            text = await collect(stream)

    assert text.strip()
    assert held == [], "the stream held the event loop"


async def test_a_loop_held_by_waiting_or_working_is_reported() -> None:
    """The check above can fail: a callback that sleeps (as blocking I/O would) or computes on
    the loop is listed, with the task it was a step of."""
    async with slow_callbacks(HELD_S) as held:
        time.sleep(HELD_S * 2)  # noqa: ASYNC251 - holding the loop is the point
        deadline = time.perf_counter() + HELD_S * 2
        while time.perf_counter() < deadline:
            pass
    assert len(held) == 1 and "test_a_loop_held_by_waiting_or_working_is_reported" in held[0]
    assert float(held[0].split(" s:")[0]) >= HELD_S * 2


async def test_a_stream_reports_the_prompt_size_counted_where_the_prompt_was_built(
    harness: Harness,
) -> None:
    reply = ReplySettings(system_prompt=CHAT[0].content, temperature=0.0, max_tokens=12)
    # Off the event loop, as the generation builds it: counting tokens blocks.
    prompt = await asyncio.to_thread(
        build_prompt, history=CHAT[1:], engine=harness.engine, reply=reply, prefix="Once upon"
    )
    counted = await asyncio.to_thread(
        lambda: [harness.engine.count_tokens(m.content) for m in prompt.messages]
    )
    assert prompt.messages == [*CHAT, ChatMessage("assistant", "Once upon")]
    assert prompt.tokens == sum(counted)

    stream = harness.engine.stream(
        prompt.messages, harness.short, request_id="counted", prompt_tokens=prompt.tokens
    )
    assert stream.result.prompt_tokens == prompt.tokens
    async with asyncio.timeout(BOUND):
        await stream.stop()
    assert stream.result.prompt_tokens == prompt.tokens


async def test_it_streams_deltas_for_a_chat(harness: Harness) -> None:
    stream = harness.engine.stream(CHAT, harness.short, request_id="hello")
    deltas: list[str] = []
    async with asyncio.timeout(BOUND), aclosing(aiter(stream)) as chunks:
        async for delta in chunks:
            deltas.append(delta)

    assert len(deltas) > 1, "the reply arrives in pieces, not at once"
    assert "".join(deltas).strip()
    assert stream.result.finish_reason in (FinishReason.STOP, FinishReason.LENGTH)
    assert 0 < stream.result.completion_tokens <= harness.short.max_tokens
    assert stream.result.stopped_at is None


async def test_a_stop_sequence_ends_the_reply_before_it(harness: Harness) -> None:
    if not harness.samples:
        pytest.skip("this engine does not model sampling")
    free = harness.engine.stream(CHAT, harness.short, request_id="free")
    async with asyncio.timeout(BOUND):
        text = await collect(free)
    words = text.split()
    assert len(words) >= 3, f"a reply of a few words to cut: {text!r}"
    # The same prompt with a stop sequence: the same greedy reply, ended just before it.
    stop = words[2]
    params = dataclasses.replace(harness.short, stop=(stop,))
    stopped = harness.engine.stream(CHAT, params, request_id="stopped")
    async with asyncio.timeout(BOUND):
        cut = await collect(stopped)

    assert cut.rstrip() == text[: text.index(stop)].rstrip()
    assert stopped.result.finish_reason is FinishReason.STOP


async def test_a_seed_makes_a_sampled_reply_repeatable(harness: Harness) -> None:
    if not harness.samples:
        pytest.skip("this engine does not model sampling")
    params = dataclasses.replace(harness.short, temperature=1.5, top_p=0.95, seed=1234)
    replies = []
    for attempt in range(2):
        stream = harness.engine.stream(CHAT, params, request_id=f"seeded-{attempt}")
        async with asyncio.timeout(BOUND):
            replies.append(await collect(stream))
    assert replies[0] == replies[1] and replies[0].strip()


async def test_it_stops_the_engines_work_mid_stream(harness: Harness) -> None:
    stream = harness.engine.stream(CHAT, harness.long, request_id="stop-me")
    deltas: list[str] = []
    two_deltas = asyncio.Event()

    async def read() -> None:
        # Like the generation service: one task reads, another presses Stop.
        async with aclosing(aiter(stream)) as chunks:
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

    assert confirmed_at is not None
    assert stream.result.finish_reason is FinishReason.ABORT
    assert stream.result.stopped_at == confirmed_at
    assert stream.result.completion_tokens < harness.long.max_tokens
    async with asyncio.timeout(BOUND):
        await harness.work_ended(stream, state)
    assert await stream.stop() == confirmed_at, "a second stop() is harmless"


async def test_it_accepts_stop_before_the_stream_starts(harness: Harness) -> None:
    stream = harness.engine.stream(CHAT, harness.short, request_id="never")
    async with asyncio.timeout(BOUND):
        assert await stream.stop() is not None
        assert await collect(stream) == ""
    assert stream.result.stopped_at is not None
    assert stream.result.finish_reason is FinishReason.ABORT


async def test_it_ends_the_engines_work_when_the_reader_goes_away(harness: Harness) -> None:
    stream = harness.engine.stream(CHAT, harness.long, request_id="abandoned")
    state = None
    async with asyncio.timeout(BOUND), aclosing(aiter(stream)) as deltas:
        await anext(deltas)
        await anext(deltas)
        state = harness.before_stop(stream)
    # Closed without stop(): the engine is told all the same.
    assert stream.result.completion_tokens < harness.long.max_tokens
    async with asyncio.timeout(BOUND):
        await harness.work_ended(stream, state)


async def test_a_stop_after_the_reply_ended_stops_nothing(harness: Harness) -> None:
    stream = harness.engine.stream(CHAT, harness.short, request_id="done")
    async with asyncio.timeout(BOUND):
        assert await collect(stream)
        assert await stream.stop() is not None
    assert stream.result.finish_reason in (FinishReason.STOP, FinishReason.LENGTH)
    assert stream.result.stopped_at is None


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
        assert stream.result.finish_reason in (FinishReason.STOP, FinishReason.LENGTH)


async def test_it_stops_one_stream_and_the_other_goes_on(harness: Harness) -> None:
    stopped = harness.engine.stream(CHAT, harness.long, request_id="stopped")
    other = harness.engine.stream(CHAT, harness.short, request_id="other")
    first_delta = asyncio.Event()

    async def read_stopped() -> None:
        async with aclosing(aiter(stopped)) as chunks:
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

    assert stopped.result.finish_reason is FinishReason.ABORT
    assert other_text.strip()
    assert other.result.finish_reason in (FinishReason.STOP, FinishReason.LENGTH)


async def test_it_turns_an_engine_failure_into_an_error(harness: Harness) -> None:
    stream = harness.failing()
    with pytest.raises(EngineError) as failure:
        async with asyncio.timeout(BOUND):
            await collect(stream)
    assert str(failure.value).strip(), "the user is told something readable"


# -- the bookkeeping every backend inherits ------------------------------------------------------


class HungStream(EngineStream):
    """A test double for a wedged engine: one delta, then it neither produces nor lets go."""

    stop_timeout_s = 0.2

    def __init__(self, abort: str) -> None:
        super().__init__()
        self.abort = abort
        self.aborts = 0

    async def _deltas(self) -> AsyncGenerator[str, None]:
        yield "one "
        await asyncio.Event().wait()  # never set: the reply never ends by itself

    async def _abort(self) -> None:
        self.aborts += 1
        if self.abort == "hangs":
            await asyncio.Event().wait()  # the abort call itself never returns
        elif self.abort == "fails":
            raise RuntimeError("engine core died")
        # "ignored": the abort is taken and never acted on


@pytest.mark.parametrize("abort", ["ignored", "hangs", "fails"])
async def test_a_stop_the_engine_never_confirms_gives_up_after_the_timeout(abort: str) -> None:
    stream = HungStream(abort)
    async with aclosing(aiter(stream)) as deltas:
        assert await anext(deltas) == "one "
        reader = asyncio.ensure_future(anext(deltas))  # waits for a delta that never comes
        started = time.monotonic()
        async with asyncio.timeout(BOUND):
            assert await stream.stop() is None, "not confirmed"
        assert time.monotonic() - started < 2, "bounded by stop_timeout_s"
        # A second Stop is bounded too, and does not ask the engine again.
        async with asyncio.timeout(BOUND):
            assert await stream.stop() is None
        assert stream.aborts == 1
        assert stream.stop_requested
        assert stream.result.stopped_at is None
        assert stream.result.finish_reason is None, "nobody knows how it ended"
        reader.cancel()
        with pytest.raises(asyncio.CancelledError):
            await reader


@pytest.mark.parametrize(
    ("value", "reason"),
    [("stop", FinishReason.STOP), ("length", FinishReason.LENGTH), ("abort", FinishReason.ABORT)],
)
def test_it_reads_an_engines_finish_reason(value: str, reason: FinishReason) -> None:
    assert FinishReason.parse(value) is reason
    assert reason.is_natural is (reason is not FinishReason.ABORT)


@pytest.mark.parametrize("value", ["error", "", None])
def test_an_unknown_finish_reason_reads_as_none(value: object) -> None:
    assert FinishReason.parse(value) is None


# -- choosing a backend ----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["scripted", "llamacpp", "openai", "vllm"])
def test_every_backend_passes_the_setting_check(settings: Any, name: str) -> None:
    settings.CHAT_ENGINE = name
    assert check_engine_setting() is None


def test_an_unknown_llama_binding_is_named_with_the_choices(tmp_path: Any) -> None:
    with pytest.raises(ImproperlyConfigured) as refused:
        load_model(tmp_path / "model.gguf", context_tokens=256, threads=None, binding="llama")

    assert "CHAT_LLAMA_BINDING='llama'" in str(refused.value)
    for name in BINDINGS:
        assert name in str(refused.value)


def test_an_unknown_engine_is_named_with_the_choices(settings: Any) -> None:
    settings.CHAT_ENGINE = "llama"
    message = check_engine_setting()

    assert message is not None
    assert "CHAT_ENGINE='llama'" in message
    for name in ("scripted", "llamacpp", "openai", "vllm"):
        assert name in message
    with pytest.raises(ImproperlyConfigured) as refused:
        get_engine()
    assert str(refused.value) == message, "the check and the send refuse it in the same words"

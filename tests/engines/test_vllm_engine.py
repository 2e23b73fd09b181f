"""The vllm engine against the stand-in of vLLM's AsyncLLM (tests/support/fake_vllm.py), and,
where the vllm package is installed, a check that the real classes and signatures we call exist."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import inspect
import os
import re
import subprocess
import sys
import time
from contextlib import aclosing
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.core.exceptions import ImproperlyConfigured

from conversations import engines
from conversations.engines import get_engine, reset_engines
from conversations.engines import vllm as vllm_backend
from conversations.engines.base import ChatMessage, EngineError, FinishReason, SamplingParams
from conversations.engines.specs import legacy_spec
from conversations.models import Message
from tests.support import fake_vllm
from tests.support.sockets import finished, streamed_text

BOUND = 20.0  # keeps a broken engine from hanging the suite; not a speed requirement
CHAT = [ChatMessage("system", "Be brief."), ChatMessage("user", "Hello there")]
VLLM_INSTALLED = importlib.util.find_spec("vllm") is not None


def make_llm_class(**knobs: Any) -> type[fake_vllm.AsyncLLM]:
    return type("AsyncLLM", (fake_vllm.AsyncLLM,), {"step_s": 0.005, **knobs})


def make_engine(llm_class: type[fake_vllm.AsyncLLM] | None = None) -> vllm_backend.VllmEngine:
    return vllm_backend.VllmEngine(
        model="Qwen/Qwen2.5-0.5B-Instruct",
        tensor_parallel_size=1,
        max_model_len=4096,
        gpu_memory_utilization=0.5,
        api=fake_vllm.api(llm_class or make_llm_class()),
    )


@pytest.fixture
def on_vllm(settings: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """CHAT_ENGINE=vllm through the registry; only the import of the vllm package is replaced."""
    llm_class = make_llm_class(reply_tokens=30)
    monkeypatch.setattr(vllm_backend, "import_vllm", lambda: fake_vllm.api(llm_class))
    settings.CHAT_ENGINE = "vllm"
    settings.CHAT_VLLM_MODEL = "Qwen/Qwen2.5-0.5B-Instruct"
    settings.CHAT_VLLM_TENSOR_PARALLEL_SIZE = 2
    settings.CHAT_VLLM_MAX_MODEL_LEN = 8192
    settings.CHAT_VLLM_GPU_MEMORY_UTILIZATION = 0.6
    reset_engines()
    return llm_class


async def read(stream: Any) -> str:
    async with asyncio.timeout(BOUND), aclosing(aiter(stream)) as deltas:
        return "".join([d async for d in deltas])


# -- through the socket, selected by settings ------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_it_streams_a_reply_built_from_settings(
    connect: Any, alice: Any, conversation: Any, on_vllm: Any
) -> None:
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="Hello there")
    events = await socket.receive_until(finished, timeout=BOUND)
    await socket.send(action="send", content="And again")
    await socket.receive_until(finished, timeout=BOUND)

    engine: Any = get_engine()
    llm = engine.llm()
    assert [type(b) for b in fake_vllm.built].count(on_vllm) == 1, "built once per process"
    args = llm.engine_args
    assert (args.model, args.tensor_parallel_size, args.max_model_len) == (
        "Qwen/Qwen2.5-0.5B-Instruct",
        2,
        8192,
    )
    assert args.gpu_memory_utilization == 0.6

    row = await database_sync_to_async(
        lambda: conversation.messages.filter(role=Message.Role.ASSISTANT).first()
    )()
    request = llm.requests[row.request_id]  # vLLM ran it under the Message's request id
    assert request.sampling_params.output_kind is fake_vllm.RequestOutputKind.DELTA
    assert request.sampling_params.n == 1
    # The prompt went through the model's chat template, ending where the reply begins.
    tokenizer = llm.get_tokenizer()
    expected = tokenizer.apply_chat_template(
        [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Hello there"},
        ],
        tokenize=False,
        add_generation_prompt=True,
    )
    assert request.prompt_token_ids == tokenizer.encode(expected, add_special_tokens=False)
    assert streamed_text(events) == "".join(fake_vllm.fake_token(i) for i in range(30))
    assert row.status == Message.Status.COMPLETE
    assert row.finish_reason == "stop"
    assert row.prompt_tokens == len(request.prompt_token_ids)
    assert row.completion_tokens == request.produced == 30


async def longest_pause(until: asyncio.Future[Any]) -> float:
    """The longest the event loop went without running a 20 ms ticker, until `until` is done."""
    last = time.monotonic()
    longest = 0.0
    while not until.done():
        await asyncio.sleep(0.02)
        now = time.monotonic()
        longest = max(longest, now - last)
        last = now
    return longest


@pytest.mark.django_db(transaction=True)
async def test_the_first_reply_waits_for_the_model_to_load_and_completes(
    connect: Any, alice: Any, conversation: Any, on_vllm: Any, settings: Any
) -> None:
    """Bug: vLLM was built inside the first reply's stream, on the event loop: the process froze
    for the whole load, and the reply was then stopped as abandoned (no tab had answered a ping
    within the grace period). Now the model loads on a thread; pings, pages and Stops go on."""
    on_vllm.load_s = 1.5  # a slow load, 3x the grace period
    settings.CHAT_FLUSH_INTERVAL_S = 0.1
    settings.CHAT_DISCONNECT_GRACE_S = 0.5
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="Hello there")
    reply = asyncio.ensure_future(socket.receive_until(finished, timeout=BOUND))
    pause = await longest_pause(reply)
    final = (await reply)[-1]["message"]

    assert final["status"] == "complete", final["cancelled_by"] or final["error"]
    assert pause < 0.5, f"the event loop stalled for {pause:.2f} s during the load"
    assert final["ttft_ms"] < 1000, "time to first token counts from the loaded model"
    row = await database_sync_to_async(
        lambda: conversation.messages.filter(role=Message.Role.ASSISTANT).first()
    )()
    assert (row.first_token_at - row.created_at).total_seconds() >= 1.5, "it did wait"


@pytest.mark.django_db(transaction=True)
async def test_a_stop_while_the_model_loads_ends_the_reply_at_once(
    connect: Any, alice: Any, conversation: Any, on_vllm: Any
) -> None:
    on_vllm.load_s = 5
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="Hello there")
    await socket.receive_until(lambda e: e["type"] == "message.started", timeout=BOUND)
    began = time.monotonic()
    await socket.send(action="cancel")
    final = (await socket.receive_until(finished, timeout=BOUND))[-1]["message"]
    assert final["status"] == "cancelled"
    assert time.monotonic() - began < 2, "the Stop did not wait for the load"
    await asyncio.to_thread(engines.start_loading().result, BOUND)  # let the load end


def test_vllm_options_pass_through_from_settings(
    settings: Any, monkeypatch: pytest.MonkeyPatch, on_vllm: Any
) -> None:
    settings.CHAT_VLLM_ENFORCE_EAGER = True
    settings.CHAT_VLLM_LOG_REQUESTS = True
    settings.CHAT_VLLM_ENGINE_ARGS = {"disable_log_stats": True, "max_model_len": 2048}
    reset_engines()
    engine: Any = get_engine()
    engine.load()
    args = engine.llm().engine_args
    assert args.enforce_eager is True
    assert args.enable_log_requests is True
    assert args.disable_log_stats is True
    assert args.max_model_len == 2048, "CHAT_VLLM_ENGINE_ARGS wins over the named settings"


def test_an_engine_argument_vllm_lacks_is_refused_by_name(settings: Any, on_vllm: Any) -> None:
    settings.CHAT_VLLM_ENGINE_ARGS = {"no_such_argument": 1}
    reset_engines()
    with pytest.raises(ImproperlyConfigured, match="no_such_argument"):
        get_engine()


def test_closing_the_engines_shuts_vllm_down(on_vllm: Any) -> None:
    engines.start_loading().result(BOUND)
    llm = get_engine().llm()  # type: ignore[attr-defined]
    engines.close_engines()
    assert llm.shut_down, "vLLM's engine-core and worker processes were told to stop"


@pytest.mark.django_db(transaction=True)
async def test_stop_aborts_the_request_in_vllm(
    connect: Any, alice: Any, conversation: Any, on_vllm: Any
) -> None:
    on_vllm.reply_tokens = 10_000
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="Write forever")
    events = await socket.receive_until(lambda e: e["type"] == "message.delta", timeout=BOUND)
    await socket.send(action="cancel")
    events += await socket.receive_until(finished, timeout=BOUND)

    final = events[-1]["message"]
    assert final["status"] == "cancelled"
    assert final["finish_reason"] == "abort"
    llm = get_engine().llm()  # type: ignore[attr-defined]
    request = llm.requests[final["request_id"]]
    assert final["request_id"] in llm.aborted_ids
    assert request.finish_reason == "abort"
    assert request.produced_after_abort == 0
    assert llm.num_requests_running == 0, "vLLM's scheduler let it go"
    assert final["completion_tokens"] == request.produced
    assert final["content"] == streamed_text(events)


@pytest.mark.django_db(transaction=True)
async def test_a_failing_engine_saves_an_error_with_the_partial_text(
    connect: Any, alice: Any, conversation: Any, on_vllm: Any
) -> None:
    on_vllm.fail_after = 3
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="Hello")
    events = await socket.receive_until(finished, timeout=BOUND)

    final = events[-1]["message"]
    assert final["status"] == "error"
    assert final["error"] == "The model failed."
    assert final["content"] == "tok0 tok1 tok2 "
    row = await database_sync_to_async(conversation.messages.get)(role=Message.Role.ASSISTANT)
    assert "CUDA error" in row.error_detail, "the cause, for operators"


# -- the engine on its own ---------------------------------------------------------------------


async def test_closing_the_stream_aborts_in_vllm() -> None:
    engine = make_engine(make_llm_class(reply_tokens=10_000))
    stream = engine.stream(CHAT, SamplingParams(max_tokens=10_000), request_id="r1")
    async with asyncio.timeout(BOUND):
        deltas = aiter(stream)
        await anext(deltas)
        await deltas.aclose()

    llm = engine.llm()
    assert llm.requests["r1"].finish_reason == "abort"
    assert llm.num_requests_running == 0
    assert llm.requests["r1"].produced_after_abort == 0


async def test_stop_does_not_wait_for_the_next_token() -> None:
    engine = make_engine(make_llm_class(reply_tokens=10_000))
    stream = engine.stream(CHAT, SamplingParams(max_tokens=10_000), request_id="busy")
    reader = asyncio.create_task(read(stream))
    while not engine.llm().requests.get("busy") or not stream.result.completion_tokens:  # noqa: ASYNC110
        await asyncio.sleep(0.005)
    engine.llm().frozen = True  # nothing more comes out of the engine by itself
    async with asyncio.timeout(BOUND):
        assert await stream.stop() is not None, "confirmed"
        await reader

    assert engine.llm().requests["busy"].finish_reason == "abort"
    assert stream.result.finish_reason is FinishReason.ABORT


async def test_deltas_the_reader_has_not_taken_are_merged_not_dropped() -> None:
    engine = make_engine(make_llm_class(reply_tokens=50))
    stream = engine.stream(CHAT, SamplingParams(max_tokens=100), request_id="slow")
    pieces: list[str] = []
    async with asyncio.timeout(BOUND), aclosing(aiter(stream)) as deltas:
        pieces.append(await anext(deltas))
        while engine.llm().requests["slow"].produced < 20:  # noqa: ASYNC110 (the fake GPU runs on)
            await asyncio.sleep(0.005)
        pieces.extend([d async for d in deltas])

    assert "".join(pieces) == "".join(fake_vllm.fake_token(i) for i in range(50))
    assert len(pieces) < 50, "some outputs arrived merged"
    assert stream.result.completion_tokens == 50


async def test_stop_that_races_the_registration_still_aborts() -> None:
    """An abort for an id vLLM has not registered yet is a no-op; the stream aborts again."""
    gate = asyncio.Event()
    registering = asyncio.Event()

    class GatedLLM(make_llm_class(reply_tokens=10_000)):  # type: ignore[misc]
        async def add_request(self, *args: Any, **kwargs: Any) -> Any:
            registering.set()
            await gate.wait()
            return await super().add_request(*args, **kwargs)

    engine = make_engine(GatedLLM)
    stream = engine.stream(CHAT, SamplingParams(max_tokens=10_000), request_id="race")
    reader = asyncio.create_task(read(stream))
    # The reader has handed the request to vLLM, which holds it at the gate, unregistered.
    async with asyncio.timeout(BOUND):
        await registering.wait()
    stopping = asyncio.create_task(stream.stop())
    while "race" not in engine.llm().aborted_ids:  # noqa: ASYNC110 (the first abort: lost)
        await asyncio.sleep(0)
    assert "race" not in engine.llm().requests, "vLLM did not know the id when it was aborted"
    gate.set()
    async with asyncio.timeout(BOUND):
        await stopping
        await reader

    request = engine.llm().requests["race"]
    assert engine.llm().aborted_ids.count("race") >= 2
    assert request.finish_reason == "abort"
    assert stream.result.finish_reason is FinishReason.ABORT
    assert engine.llm().num_requests_running == 0


async def test_it_works_with_the_coroutine_get_tokenizer_of_vllm_0_11() -> None:
    engine = make_engine(type("AsyncLLM", (fake_vllm.AsyncLLM011,), {"reply_tokens": 5}))
    stream = engine.stream(CHAT, SamplingParams(max_tokens=20), request_id="old")
    assert await read(stream) == "tok0 tok1 tok2 tok3 tok4 "
    assert stream.result.prompt_tokens == len(engine.llm().requests["old"].prompt_token_ids)
    assert engine.count_tokens("three short words") == 3, "the model's tokenizer, once loaded"


async def test_a_model_that_cannot_start_is_an_engine_error() -> None:
    class Broken(fake_vllm.AsyncLLM):
        @classmethod
        def from_engine_args(cls, engine_args: Any, *args: Any, **kwargs: Any) -> Any:
            raise ValueError("No CUDA GPUs are available")

    stream = make_engine(Broken).stream(CHAT, SamplingParams(), request_id="x")
    with pytest.raises(EngineError, match=r"^The model could not start\.$") as raised:
        await read(stream)
    assert re.search(r"vLLM could not start model .*No CUDA GPUs", raised.value.detail)


def test_it_needs_a_model_name(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vllm_backend, "import_vllm", fake_vllm.api)
    settings.CHAT_VLLM_MODEL = ""
    with pytest.raises(ImproperlyConfigured, match="CHAT_VLLM_MODEL"):
        vllm_backend.build_engine(legacy_spec("vllm"))


def test_it_refuses_a_gpu_share_above_one(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vllm_backend, "import_vllm", fake_vllm.api)
    settings.CHAT_VLLM_MODEL = "m"
    settings.CHAT_VLLM_GPU_MEMORY_UTILIZATION = 1.5
    with pytest.raises(ImproperlyConfigured, match="at most 1"):
        vllm_backend.build_engine(legacy_spec("vllm"))


# -- vllm stays optional -------------------------------------------------------------------------


@pytest.mark.skipif(VLLM_INSTALLED, reason="vllm is installed here")
def test_without_vllm_selecting_it_says_what_to_install() -> None:
    with pytest.raises(ImproperlyConfigured, match=r"pip install '\.\[vllm\]'"):
        vllm_backend.import_vllm()


def test_other_engines_never_import_vllm(settings: Any) -> None:
    code = (
        "import sys, django; django.setup()\n"
        "from conversations.engines import get_engine\n"
        "get_engine('scripted')\n"
        "loaded = [m for m in sys.modules if m.split('.')[0] == 'vllm' "
        "or m == 'conversations.engines.vllm']\n"
        "assert not loaded, loaded\n"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "chatsite.settings"}
    result = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr[-2000:]


# -- the real vllm, where it is installed ---------------------------------------------------


@pytest.mark.skipif(
    not VLLM_INSTALLED,
    reason="vllm is not installed (pip install '.[vllm]' on a GPU machine runs this check)",
)
def test_the_real_vllm_has_what_the_backend_calls() -> None:
    api = vllm_backend.import_vllm()

    generate = inspect.signature(api.AsyncLLM.generate).parameters
    assert list(generate)[1:4] == ["prompt", "sampling_params", "request_id"]
    assert inspect.isasyncgenfunction(api.AsyncLLM.generate)
    abort = inspect.signature(api.AsyncLLM.abort).parameters
    assert list(abort)[1] == "request_id"
    assert inspect.iscoroutinefunction(api.AsyncLLM.abort)
    assert "engine_args" in inspect.signature(api.AsyncLLM.from_engine_args).parameters
    assert callable(api.AsyncLLM.get_tokenizer)

    fields = {f.name for f in dataclasses.fields(api.AsyncEngineArgs)}
    assert {"model", "tensor_parallel_size", "max_model_len", "gpu_memory_utilization"} <= fields
    params = api.SamplingParams(
        n=1, max_tokens=5, temperature=0.5, output_kind=api.RequestOutputKind.DELTA
    )
    assert params.output_kind == api.RequestOutputKind.DELTA

    from vllm.outputs import CompletionOutput, RequestOutput

    completion_fields = {f.name for f in dataclasses.fields(CompletionOutput)}
    assert {"text", "token_ids", "finish_reason"} <= completion_fields
    assert {"prompt_token_ids", "outputs", "finished"} <= set(
        inspect.signature(RequestOutput.__init__).parameters
    )

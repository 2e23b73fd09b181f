"""A stand-in for the part of vLLM's API the vllm engine uses, for machines without a GPU.

It follows vLLM's V1 sources (vllm/v1/engine/async_llm.py, output_processor.py, vllm/outputs.py,
vllm/sampling_params.py, vllm/engine/arg_utils.py) where our code depends on them:

- `AsyncLLM.from_engine_args(engine_args, start_engine_loop=True, usage_context=...,
  stat_loggers=None)` builds the engine, blocking its thread while the model loads (`load_s`);
  `shutdown()` stops it; `get_tokenizer()` is plain (it was a coroutine up to
  0.11: `AsyncLLM011` keeps that shape).
- `generate(prompt, sampling_params, request_id, *, ...)` is an async generator of
  RequestOutput. A RequestOutputCollector sits between the engine and the reader; with
  RequestOutputKind.DELTA, outputs the reader has not taken yet are merged (RequestOutput.add
  with aggregate=True), never dropped. Closing or cancelling the generator aborts the request
  (`abort(..., internal=True)`), as vLLM's `except (CancelledError, GeneratorExit)` does; an
  engine failure surfaces as EngineGenerateError raised from the cause.
- `abort(request_id | iterable, internal=False)` is a coroutine: it takes the request out of
  the scheduler and puts a final output (finished, finish_reason "abort") on its collector, so
  the reader's stream ends. An unknown id is ignored.
- SamplingParams and AsyncEngineArgs refuse keywords vLLM does not have.

What the "GPU" does is recorded per request (`FakeRequest`) so tests can check, at the
engine's side, that Stop ended the work: tokens produced after the abort, when it left the
scheduler, how many requests are running (vLLM's `vllm:num_requests_running` gauge).
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections.abc import AsyncGenerator, Iterable, MutableSequence
from dataclasses import dataclass, field
from typing import Any


class RequestOutputKind(enum.Enum):
    CUMULATIVE = 0
    DELTA = 1
    FINAL_ONLY = 2


@dataclass(kw_only=True)
class SamplingParams:
    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None
    max_tokens: int | None = 16
    output_kind: RequestOutputKind = RequestOutputKind.CUMULATIVE


@dataclass(kw_only=True)
class AsyncEngineArgs:
    model: str = "Qwen/Qwen3-0.6B"
    tokenizer: str | None = None
    tensor_parallel_size: int = 1
    max_model_len: int | None = None
    gpu_memory_utilization: float = 0.9
    enforce_eager: bool = False
    enable_log_requests: bool = False
    disable_log_stats: bool = False


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: MutableSequence[int]
    cumulative_logprob: float | None
    logprobs: Any
    finish_reason: str | None = None
    stop_reason: int | str | None = None

    def finished(self) -> bool:
        return self.finish_reason is not None


class RequestOutput:
    def __init__(
        self,
        request_id: str,
        prompt: str | None,
        prompt_token_ids: list[int] | None,
        prompt_logprobs: Any,
        outputs: list[CompletionOutput],
        finished: bool,
        **kwargs: Any,
    ):
        self.request_id = request_id
        self.prompt = prompt
        self.prompt_token_ids = prompt_token_ids
        self.prompt_logprobs = prompt_logprobs
        self.outputs = outputs
        self.finished = finished

    def add(self, next_output: RequestOutput, aggregate: bool) -> None:
        """Merge a later output into this one (vllm/outputs.py)."""
        self.finished |= next_output.finished
        for next_completion in next_output.outputs:
            for i, completion in enumerate(self.outputs):
                if completion.index == next_completion.index:
                    if aggregate:
                        completion.text += next_completion.text
                        completion.token_ids = list(completion.token_ids)
                        completion.token_ids.extend(next_completion.token_ids)
                        completion.finish_reason = next_completion.finish_reason
                        completion.stop_reason = next_completion.stop_reason
                    else:
                        self.outputs[i] = next_completion
                    break
            else:
                self.outputs.append(next_completion)


class EngineGenerateError(Exception):
    """Raised by generate() for an unexpected failure, with the failure as its __cause__."""


class EngineDeadError(Exception):
    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__("EngineCore encountered an issue. See stack trace for the root cause.")


class RequestOutputCollector:
    """vllm/v1/engine/output_processor.py: one pending output, merged while the reader lags."""

    def __init__(self, output_kind: RequestOutputKind, request_id: str):
        self.aggregate = output_kind == RequestOutputKind.DELTA
        self.request_id = request_id
        self.output: RequestOutput | Exception | None = None
        self.ready = asyncio.Event()

    def put(self, output: RequestOutput | Exception) -> None:
        if self.output is None or isinstance(output, Exception):
            self.output = output
            self.ready.set()
        elif isinstance(self.output, RequestOutput):
            self.output.add(output, aggregate=self.aggregate)

    async def get(self) -> RequestOutput:
        while (output := self.output) is None:
            await self.ready.wait()
        self.output = None
        self.ready.clear()
        if isinstance(output, Exception):
            raise output
        return output

    def get_nowait(self) -> RequestOutput | None:
        output = self.output
        if output is not None:
            self.output = None
            self.ready.clear()
        if isinstance(output, Exception):
            raise output
        return output


class FakeTokenizer:
    """Whitespace tokens; the chat template is ChatML, like Qwen's."""

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}

    def apply_chat_template(
        self,
        conversation: list[dict[str, str]],
        *,
        tokenize: bool = True,
        add_generation_prompt: bool = False,
        **kwargs: Any,
    ) -> Any:
        text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in conversation)
        if add_generation_prompt:
            text += "<|im_start|>assistant\n"
        return self.encode(text, add_special_tokens=False) if tokenize else text

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        ids = [self.vocab.setdefault(word, len(self.vocab) + 10) for word in text.split()]
        return ([1] if add_special_tokens else []) + ids


@dataclass
class FakeRequest:
    """One request as the fake GPU saw it."""

    request_id: str
    prompt_token_ids: list[int]
    sampling_params: SamplingParams
    produced: int = 0
    produced_after_abort: int = 0
    abort_requested_at: float | None = None
    left_scheduler_at: float | None = None
    finish_reason: str | None = None
    produce_times: list[float] = field(default_factory=list)


def fake_token(index: int) -> str:
    return f"tok{index} "


class AsyncLLM:
    """A fake engine core: one scheduler task steps every running request, a token each."""

    # Knobs tests set on the class before the backend builds an engine.
    step_s = 0.01
    reply_tokens = 40  # the "model" ends its reply (finish_reason "stop") after this many
    fail_after: int | None = None  # every request fails once it has produced this many tokens
    frozen = False  # produce nothing for now (a GPU busy with a long prefill, say)
    load_s = 0.0  # from_engine_args blocks its thread this long, as loading a model does

    def __init__(self, engine_args: AsyncEngineArgs):
        self.engine_args = engine_args
        self.requests: dict[str, FakeRequest] = {}
        self.aborted_ids: list[str] = []
        self._running: dict[str, tuple[FakeRequest, RequestOutputCollector]] = {}
        self._scheduler: asyncio.Task[None] | None = None
        self._tokenizer = FakeTokenizer()
        self.shut_down = False
        built.append(self)

    @classmethod
    def from_engine_args(
        cls,
        engine_args: AsyncEngineArgs,
        start_engine_loop: bool = True,
        usage_context: Any = None,
        stat_loggers: Any = None,
    ) -> AsyncLLM:
        if not isinstance(engine_args, AsyncEngineArgs):
            raise TypeError("from_engine_args takes an AsyncEngineArgs")
        time.sleep(cls.load_s)
        return cls(engine_args)

    def shutdown(self) -> None:
        """vLLM stops its engine-core and worker processes here; the fake notes it."""
        self.shut_down = True
        if self._scheduler is not None and not self._scheduler.get_loop().is_closed():
            self._scheduler.cancel()

    def get_tokenizer(self) -> FakeTokenizer:
        return self._tokenizer

    @property
    def num_requests_running(self) -> int:
        return len(self._running)

    async def add_request(
        self, request_id: str, prompt: Any, params: SamplingParams
    ) -> RequestOutputCollector:
        if isinstance(prompt, str):
            prompt_ids = self._tokenizer.encode(prompt)
        elif isinstance(prompt, dict) and isinstance(prompt.get("prompt_token_ids"), list):
            prompt_ids = list(prompt["prompt_token_ids"])
        else:
            raise TypeError(f"unsupported prompt {prompt!r}")
        await asyncio.sleep(0)  # the real one awaits input processing here
        request = FakeRequest(request_id, prompt_ids, params)
        self.requests[request_id] = request
        queue = RequestOutputCollector(params.output_kind, request_id)
        self._running[request_id] = (request, queue)
        if self._scheduler is None or self._scheduler.done():
            self._scheduler = asyncio.create_task(self._schedule())
        return queue

    async def generate(
        self,
        prompt: Any,
        sampling_params: SamplingParams,
        request_id: str,
        *,
        prompt_text: str | None = None,
        lora_request: Any = None,
        tokenization_kwargs: dict[str, Any] | None = None,
        trace_headers: Any = None,
        priority: int = 0,
        data_parallel_rank: int | None = None,
    ) -> AsyncGenerator[RequestOutput, None]:
        q: RequestOutputCollector | None = None
        try:
            q = await self.add_request(request_id, prompt, sampling_params)
            finished = False
            while not finished:
                out = q.get_nowait() or await q.get()
                finished = out.finished
                yield out
        except (asyncio.CancelledError, GeneratorExit):
            if q is not None:
                await self.abort(q.request_id, internal=True)
            raise
        except EngineDeadError:
            raise
        except Exception as exc:
            if q is not None:
                await self.abort(q.request_id, internal=True)
            raise EngineGenerateError() from exc

    async def abort(self, request_id: str | Iterable[str], internal: bool = False) -> None:
        ids = (request_id,) if isinstance(request_id, str) else list(request_id)
        for rid in ids:
            self.aborted_ids.append(rid)
            entry = self._running.pop(rid, None)
            if entry is None:
                continue  # unknown or finished: vLLM ignores it too
            request, queue = entry
            now = time.time()
            request.abort_requested_at = now
            request.left_scheduler_at = now
            request.finish_reason = "abort"
            queue.put(self._output(request, [], "", "abort"))
        await asyncio.sleep(0)  # the real one awaits the engine core here

    async def _schedule(self) -> None:
        while self._running:
            await asyncio.sleep(self.step_s)
            if self.frozen:
                continue
            for rid, (request, queue) in list(self._running.items()):
                index = request.produced
                if self.fail_after is not None and index >= self.fail_after:
                    del self._running[rid]
                    request.left_scheduler_at = time.time()
                    queue.put(RuntimeError("CUDA error: an illegal memory access (fake)"))
                    continue
                request.produced += 1
                request.produce_times.append(time.time())
                if request.abort_requested_at is not None:
                    request.produced_after_abort += 1
                limit = request.sampling_params.max_tokens or self.reply_tokens
                reason = None
                if request.produced >= limit:
                    reason = "length"
                elif request.produced >= self.reply_tokens:
                    reason = "stop"
                if reason:
                    del self._running[rid]
                    request.left_scheduler_at = time.time()
                    request.finish_reason = reason
                queue.put(self._output(request, [1000 + index], fake_token(index), reason))

    @staticmethod
    def _output(
        request: FakeRequest, token_ids: list[int], text: str, reason: str | None
    ) -> RequestOutput:
        return RequestOutput(
            request_id=request.request_id,
            prompt=None,
            prompt_token_ids=request.prompt_token_ids,
            prompt_logprobs=None,
            outputs=[CompletionOutput(0, text, token_ids, None, None, reason)],
            finished=reason is not None,
        )


class AsyncLLM011(AsyncLLM):
    """vLLM up to 0.11, where get_tokenizer() was a coroutine."""

    async def get_tokenizer(self) -> FakeTokenizer:  # type: ignore[override]
        return self._tokenizer


# Every engine built, newest last, so a test can look at the one the backend made.
built: list[AsyncLLM] = []


def api(async_llm: type[AsyncLLM] = AsyncLLM) -> Any:
    """The stand-in in the shape conversations.engines.vllm.import_vllm() returns."""
    from conversations.engines.vllm import VllmApi

    return VllmApi(async_llm, AsyncEngineArgs, SamplingParams, RequestOutputKind)

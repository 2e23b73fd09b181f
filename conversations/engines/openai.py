"""The openai engine: streams /chat/completions from any OpenAI-compatible server.

`vllm serve`, llama.cpp's server and hosted APIs all speak it. One task per reply reads the
server-sent events and hands text deltas to the reader through a queue. Stop cancels that task:
httpx then closes the connection (a half-read response never goes back to the pool), and a
closed connection is the abort signal these servers listen for; vLLM aborts the request in its
scheduler, llama.cpp's server stops pulling tokens and frees the model for the next request.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
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
from conversations.engines.specs import ModelSpec

# After [DONE] the reader reads on to the end of the body, so the connection goes back to the
# pool; a server that does not end it this soon loses the connection instead.
_DRAIN_S = 1.0

logger = logging.getLogger("chatsite.engines.openai")


# What the reading task hands the reader: a text delta, the failure that ended the reply, or
# None at its end.
_Item = str | BaseException | None


class OpenAIStream(EngineStream):
    def __init__(
        self, engine: OpenAIEngine, messages: list[ChatMessage], params: SamplingParams
    ) -> None:
        super().__init__()
        self.engine = engine
        self.messages = messages
        self.params = params
        self.result.prompt_tokens = sum(engine.count_tokens(m.content) for m in messages)
        self._queue: asyncio.Queue[_Item] = asyncio.Queue()
        self._reader: asyncio.Task[None] | None = None
        self._complete = False  # the server sent [DONE]
        self._saw_usage = False

    async def _deltas(self) -> AsyncGenerator[str, None]:
        self._reader = asyncio.create_task(self._read(), name="openai-stream")
        try:
            while (item := await self._queue.get()) is not None:
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            if self._complete:
                await asyncio.wait([self._reader], timeout=_DRAIN_S)
            await self._cancel_reader()  # the reader went away: close the connection now

    async def _abort(self) -> None:
        # Closing the connection is the abort signal, and once it is closed the request is over
        # for us: nothing else to wait for, even if nobody reads the stream on.
        if await self._cancel_reader() and not self._complete:
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
                "messages": [{"role": m.role, "content": m.content} for m in self.messages],
                "max_tokens": self.params.max_tokens,
                "temperature": self.params.temperature,
                **self.params.extras(),  # top_p, stop, seed: OpenAI's own names for them
                "stream": True,
                # Servers that know it (vLLM, OpenAI) end with a chunk carrying token counts.
                "stream_options": {"include_usage": True},
            }
            if self.params.continue_final:
                # vLLM's names for "write on from the last (assistant) message"; llama.cpp's
                # server does so by itself when the last message is the assistant's.
                body |= {"continue_final_message": True, "add_generation_prompt": False}
            async with client.stream("POST", "chat/completions", json=body) as response:
                if response.status_code >= 400:
                    await response.aread()
                    raise _status_error(response, model)
                engine.reachable = True
                await self._read_events(response)
            if not self._complete:
                raise EngineError("The model server ended the reply before it was complete.")
        except EngineError as exc:
            self._queue.put_nowait(exc)
        except httpx.HTTPError as exc:
            if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
                engine.reachable = False
            if not self._complete:  # once the reply is whole, a failure draining it is not one
                self._queue.put_nowait(_transport_error(exc, engine))
        except Exception as exc:
            # Anything else (a bad URL, a misused stream) must still end the reply, not hang it.
            logger.exception("openai engine reader failed")
            if not self._complete:
                self._queue.put_nowait(
                    EngineError("The request to the model server failed.", detail=repr(exc))
                )

    async def _read_events(self, response: httpx.Response) -> None:
        """Queue the text of each event, and the end of the reply at [DONE]."""
        async for line in response.aiter_lines():
            if self._complete or not line.startswith("data:"):
                continue  # blank separators, ": ping" comments, "event:" lines
            data = line[5:].strip()
            if data == "[DONE]":
                self._complete = True
                self._queue.put_nowait(None)
                continue
            try:
                chunk = json.loads(data)
                if "error" in chunk:
                    error = chunk["error"]
                    message = error.get("message") if isinstance(error, dict) else error
                    raise EngineError(
                        "The model server reported an error.",
                        detail=f"The model server reported an error: {message}",
                    )
                self._take_usage(chunk.get("usage"))
                for choice in chunk.get("choices") or ():
                    text = (choice.get("delta") or {}).get("content")
                    if text:
                        if not self._saw_usage:
                            self.result.completion_tokens += 1
                        self._queue.put_nowait(text)
                    if choice.get("finish_reason"):
                        self.result.finish_reason = FinishReason.parse(choice["finish_reason"])
            except (ValueError, TypeError, AttributeError):
                raise EngineError(
                    "The model server sent a reply that could not be read.",
                    detail=f"The model server sent a malformed chunk: {data[:80]!r}",
                ) from None

    def _take_usage(self, usage: object) -> None:
        if isinstance(usage, dict) and usage:
            self._saw_usage = True
            self.result.prompt_tokens = usage.get("prompt_tokens", self.result.prompt_tokens)
            self.result.completion_tokens = usage.get("completion_tokens", 0)


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
        # As last seen by a reply or a readiness probe; the picker shows a server that is away.
        self.reachable = True

    def load(self) -> None:
        pass  # the model lives in another server; nothing to load here

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
                raise _status_error(response, "")
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
        self, messages: list[ChatMessage], params: SamplingParams, *, request_id: str
    ) -> OpenAIStream:
        return OpenAIStream(self, messages, params)


def _status_error(response: httpx.Response, model: str) -> EngineError:
    detail = _error_detail(response)
    code = response.status_code
    if code in (401, 403):
        return EngineError(
            f"The model server refused the request (HTTP {code}).",
            detail=f"The model server refused our credentials (HTTP {code}); check the API key. "
            f"{detail}".strip(),
        )
    if code == 404 and model:
        return EngineError(
            "The model server does not have this model (HTTP 404).",
            detail=f"The model server has no model {model!r} (HTTP 404). {detail}".strip(),
        )
    return EngineError(
        f"The model server answered HTTP {code}.",
        detail=f"The model server answered HTTP {code}. {detail}".strip(),
    )


def _error_detail(response: httpx.Response) -> str:
    """The server's own explanation, from the usual JSON error shapes, kept short."""
    try:
        payload = response.json()
        error = payload.get("error", payload.get("detail", payload.get("message")))
        if isinstance(error, dict):
            error = error.get("message")
        text = str(error) if error else ""
    except (ValueError, AttributeError):
        text = response.text
    return " ".join(text.split())[:200]


def _transport_error(exc: httpx.HTTPError, engine: OpenAIEngine) -> EngineError:
    kind = exc.__class__.__name__
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
        return EngineError(
            "The model server could not be reached.",
            detail=f"Could not connect to the model server at {engine.base_url} ({kind}).",
        )
    if isinstance(exc, httpx.ReadTimeout):
        return EngineError(f"The model server sent nothing for {engine.timeout:g} seconds.")
    if isinstance(exc, httpx.RemoteProtocolError):
        return EngineError("The model server closed the connection in the middle of the reply.")
    return EngineError("The model server failed.", detail=f"{kind}: {exc}")


def build_engine(spec: ModelSpec) -> OpenAIEngine:
    """model_id: the served model (empty: the first the server lists). options: `base_url`,
    `api_key_env` (the environment variable holding the key: keys are never stored), `timeout`;
    each defaults to its CHAT_OPENAI_* setting."""
    api_key = settings.CHAT_OPENAI_API_KEY
    key_variable = spec.option("api_key_env", "")
    if key_variable:
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

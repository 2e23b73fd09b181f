"""What an OpenAI-compatible server answers over HTTP, read for the openai engine.

A streamed /chat/completions body is server-sent events: `data: {chunk}` lines, blank separators
and `: ping` comments, ending with `data: [DONE]`. Chunks carry text deltas and finish reasons,
and (on servers that know `stream_options.include_usage`) a last one the token counts. A failure
is a status code with a JSON explanation, or a transport error; each becomes an EngineError whose
message the user reads and whose detail the operator does.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx

from conversations.engines.base import (
    EngineError,
    FinishReason,
    StreamResult,
    ToolCall,
    token_count,
)


class ChatEvents:
    """Reads one streamed chat completion: its text goes to `put`, then None at [DONE]; its token
    counts, finish reason and tool calls go into `result`. A tool call comes in pieces (its id
    and name first, then its arguments a few characters a chunk), joined by the call's index."""

    def __init__(self, result: StreamResult, put: Callable[[str | None], None]) -> None:
        self.result = result
        self._put = put
        self.complete = False  # the server sent [DONE]
        self._saw_usage = False
        self._calls: dict[int, dict[str, str]] = {}  # index: id, name, arguments so far

    async def read(self, lines: AsyncIterator[str]) -> None:
        """Take every event of the body; after [DONE] the rest is read and ignored."""
        async for line in lines:
            if self.complete or not line.startswith("data:"):
                continue  # blank separators, ": ping" comments, "event:" lines
            data = line[5:].strip()
            if data == "[DONE]":
                self.complete = True
                self.result.tool_calls = [
                    ToolCall(call["id"], call["name"], call["arguments"])
                    for _, call in sorted(self._calls.items())
                ]
                self._put(None)
                continue
            try:
                self._take(json.loads(data))
            except (ValueError, TypeError, AttributeError):
                raise EngineError(
                    "The model server sent a reply that could not be read.",
                    detail=f"The model server sent a malformed chunk: {data[:80]!r}",
                ) from None

    def _take(self, chunk: Any) -> None:
        """One chunk, any JSON value: a shape other than OpenAI's raises ValueError, TypeError or
        AttributeError."""
        if "error" in chunk:
            error = chunk["error"]
            message = error.get("message") if isinstance(error, dict) else error
            raise EngineError(
                "The model server reported an error.",
                detail=f"The model server reported an error: {message}",
            )
        self._take_usage(chunk.get("usage"))
        for choice in chunk.get("choices") or ():
            self._take_tool_calls((choice.get("delta") or {}).get("tool_calls"))
            text = (choice.get("delta") or {}).get("content")
            if text is not None and not isinstance(text, str):
                # Refused, not skipped: a reply with a part left out is not the model's reply.
                raise EngineError(
                    "The model server sent a reply that could not be read.",
                    detail=f"The model server sent content that is not text: {text!r:.80}",
                )
            if text:
                if not self._saw_usage:
                    self.result.completion_tokens += 1
                self._put(text)
            if choice.get("finish_reason"):
                self.result.finish_reason = FinishReason.parse(choice["finish_reason"])

    def _take_tool_calls(self, pieces: object) -> None:
        if not pieces:
            return
        for piece in pieces:  # type: ignore[attr-defined]  # not a list: TypeError, refused
            call = self._calls.setdefault(
                int(piece.get("index", len(self._calls))),
                {"id": "", "name": "", "arguments": ""},
            )
            function = piece.get("function") or {}
            # The id and name come whole: once (OpenAI, vLLM) or with every piece (llama.cpp's
            # server); only the arguments come in pieces.
            call["id"] = str(piece.get("id") or call["id"])
            call["name"] = str(function.get("name") or call["name"])
            call["arguments"] += str(function.get("arguments") or "")

    def _take_usage(self, usage: object) -> None:
        """The server's token counts. One that is not a count (negative, text, past what a row
        holds) is dropped, and ours stands: the prompt as the caller counted it, a token a chunk."""
        if not isinstance(usage, dict):
            return
        prompt = token_count(usage.get("prompt_tokens"))
        if prompt is not None:
            self.result.prompt_tokens = prompt
        completion = token_count(usage.get("completion_tokens"))
        if completion is not None:
            self._saw_usage = True
            self.result.completion_tokens = completion


def status_error(response: httpx.Response, model: str) -> EngineError:
    """A response of status 400 or above, as the user and the operator should read it."""
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


def transport_error(exc: httpx.HTTPError, *, base_url: str, timeout: float) -> EngineError:
    """A request that failed below HTTP: no connection, a read timeout, a connection cut."""
    kind = exc.__class__.__name__
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
        return EngineError(
            "The model server could not be reached.",
            detail=f"Could not connect to the model server at {base_url} ({kind}).",
        )
    if isinstance(exc, httpx.ReadTimeout):
        return EngineError(f"The model server sent nothing for {timeout:g} seconds.")
    if isinstance(exc, httpx.RemoteProtocolError):
        return EngineError("The model server closed the connection in the middle of the reply.")
    return EngineError("The model server failed.", detail=f"{kind}: {exc}")


def list_models(
    base_url: str, api_key: str, *, timeout: float, verify: ssl.SSLContext | bool = True
) -> list[str]:
    """The ids GET {base_url}/models lists, in the server's order: the openai engine's default
    model, and the admin's connection test. Raises EngineError saying what went wrong."""
    url = base_url.rstrip("/") + "/models"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        response = httpx.get(url, headers=headers, timeout=timeout, verify=verify)
    except httpx.HTTPError as exc:
        raise transport_error(exc, base_url=base_url, timeout=timeout) from None
    if response.status_code >= 400:
        raise status_error(response, "")
    try:
        return [str(entry["id"]) for entry in response.json()["data"]]
    except (ValueError, KeyError, TypeError):
        raise EngineError(
            "The model server's list of models could not be read.",
            detail=f"{url} answered something other than OpenAI's list of models.",
        ) from None

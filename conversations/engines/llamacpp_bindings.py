"""The Python bindings of llama.cpp that the embedded engine runs on, behind one small interface.

- xllamacpp (the default, a dependency): a prebuilt manylinux wheel (34 MB), installed in seconds.
  It runs llama.cpp's own server code inside this process: a reply is a request to it, streamed
  through a callback whose return value stops the request; tokens are counted by its /tokenize
  endpoint, which it serves on a free loopback port behind a key only this process knows.
- llama-cpp-python (`pip install '.[llama-cpp-python]'`, then CHAT_LLAMA_BINDING=llama-cpp-python):
  its `Llama` API. PyPI ships it as source only, so installing it compiles llama.cpp (about ten
  minutes on two cores).

Both run the model on the calling thread, one reply at a time (the engine's one worker thread).
"""

from __future__ import annotations

import importlib.util
import json
import os
import secrets
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from django.core.exceptions import ImproperlyConfigured

Messages = list[dict[str, str]]
# Called with each piece of the reply, on the generating thread; False stops the reply there.
Emit = Callable[[str], bool]
# Sampling beyond max_tokens and temperature (top_p, stop, seed), in the names both bindings take.
Extras = Mapping[str, Any]


class LocalModel(Protocol):
    def chat(
        self,
        messages: Messages,
        *,
        max_tokens: int,
        temperature: float,
        emit: Emit,
        extras: Extras | None = None,
    ) -> str:
        """Generates a reply, handing its text to `emit` piece by piece, and returns the finish
        reason ("stop", "length"; "" when `emit` stopped it). Raises when the model fails.
        `extras`: top_p, stop and seed, those set (SamplingParams.extras)."""
        ...

    def count_tokens(self, text: str) -> int: ...

    def close(self) -> None:
        """Frees the model's memory now, not at garbage collection."""
        ...


class Xllamacpp:
    module = "xllamacpp"

    def __init__(self, path: Path, *, context_tokens: int, threads: int | None) -> None:
        import xllamacpp

        params = xllamacpp.CommonParams()
        params.model.path = str(path)
        params.n_ctx = context_tokens
        params.n_parallel = 1  # one reply at a time, like the engine's worker
        # Unset, half the cores, as llama-cpp-python does: llama.cpp's threads spin while they wait,
        # and one per core next to a busy web process slowed decoding from ~85 to 4-18 tokens/s.
        threads = threads or max(1, (os.cpu_count() or 1) // 2)
        params.cpuparams.n_threads = params.cpuparams_batch.n_threads = threads
        params.cache_ram_mib = 0  # no host-memory cache of earlier prompts (8 GiB by default)
        params.verbosity = -1  # its log goes to stderr; failures reach us through the callback
        key = secrets.token_urlsafe(24)
        params.api_keys = [key]  # the HTTP port it opens is for this process only
        self._auth = {"Authorization": f"Bearer {key}"}
        self._server: Any = xllamacpp.Server(params)
        self._tokenize_url = f"{self._server.listening_address}/tokenize"

    def chat(
        self,
        messages: Messages,
        *,
        max_tokens: int,
        temperature: float,
        emit: Emit,
        extras: Extras | None = None,
    ) -> str:
        outcome = {"finish": "", "error": ""}

        def on_chunk(chunk: dict[str, Any]) -> bool:
            """True stops the request. An exception here would be swallowed by the binding."""
            try:
                if "error" in chunk:
                    outcome["error"] = str(chunk["error"].get("message") or chunk["error"])
                    return True
                for choice in chunk.get("choices") or []:
                    if not emit(choice.get("delta", {}).get("content") or ""):
                        return True
                    outcome["finish"] = choice.get("finish_reason") or outcome["finish"]
                return False
            except Exception as exc:
                outcome["error"] = repr(exc)
                return True

        request = {
            "messages": messages,
            "max_tokens": max_tokens,
            "temperature": temperature,
            **(extras or {}),
            "stream": True,
        }
        self._server.handle_chat_completions(request, on_chunk)
        if outcome["error"]:
            raise RuntimeError(outcome["error"])
        return outcome["finish"]

    def count_tokens(self, text: str) -> int:
        body = {"content": text, "add_special": False, "parse_special": True}
        request = urllib.request.Request(
            self._tokenize_url, data=json.dumps(body).encode(), headers=self._auth
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return len(json.load(response)["tokens"])

    def close(self) -> None:
        self._server = None  # its destructor stops the server's threads and frees the model


class LlamaCppPython:
    module = "llama_cpp"

    def __init__(self, path: Path, *, context_tokens: int, threads: int | None) -> None:
        from llama_cpp import Llama

        # Any: its stubs type a streamed reply as a plain Iterator, without the close() we need.
        self._llm: Any = Llama(
            model_path=str(path), n_ctx=context_tokens, n_threads=threads, verbose=False
        )

    def chat(
        self,
        messages: Messages,
        *,
        max_tokens: int,
        temperature: float,
        emit: Emit,
        extras: Extras | None = None,
    ) -> str:
        chunks = self._llm.create_chat_completion(
            messages=messages,
            max_tokens=max_tokens,
            temperature=temperature,
            stream=True,
            **(extras or {}),
        )
        finish = ""
        try:
            for chunk in chunks:
                choice = chunk["choices"][0]
                if not emit(choice["delta"].get("content") or ""):
                    return ""
                finish = choice.get("finish_reason") or finish
        finally:
            chunks.close()  # ends llama.cpp's generation loop now, not at the next token
        return finish

    def count_tokens(self, text: str) -> int:
        return len(self._llm.tokenize(text.encode(), add_bos=False, special=True))

    def close(self) -> None:
        self._llm.close()


# CHAT_LLAMA_BINDING's choices; when it is empty, the first one installed.
BINDINGS: dict[str, type[Xllamacpp] | type[LlamaCppPython]] = {
    "xllamacpp": Xllamacpp,
    "llama-cpp-python": LlamaCppPython,
}


def load_model(
    path: Path, *, context_tokens: int, threads: int | None, binding: str = ""
) -> LocalModel:
    if binding and binding not in BINDINGS:
        raise ImproperlyConfigured(
            f"CHAT_LLAMA_BINDING={binding!r}: choose one of {', '.join(BINDINGS)}, or leave it empty."
        )
    installed = [
        name
        for name, cls in BINDINGS.items()
        if (not binding or name == binding) and importlib.util.find_spec(cls.module)
    ]
    if not installed:
        raise ImproperlyConfigured(
            f"The embedded model needs {binding or 'a llama.cpp binding'}: "
            f"pip install {binding or 'xllamacpp'}."
        )
    return BINDINGS[installed[0]](path, context_tokens=context_tokens, threads=threads)

"""Engine registry: a backend's module is imported only when it is selected.

Adding a backend is one new file in this package and one line in BACKENDS.
"""

from __future__ import annotations

import importlib
import threading

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from conversations.engines.base import Engine

BACKENDS = {
    "scripted": "conversations.engines.scripted",
    "llamacpp": "conversations.engines.llamacpp",
    "openai": "conversations.engines.openai",
    "vllm": "conversations.engines.vllm",
}

_engines: dict[str, Engine] = {}
_lock = threading.Lock()


def _unknown_engine(name: object) -> str:
    return f"CHAT_ENGINE={name!r} is not a known engine; choose one of {', '.join(BACKENDS)}."


def check_engine_setting() -> str | None:
    """What is wrong with settings.CHAT_ENGINE, for a system check; None if it names a backend.

    Only the name is checked: building the engine (loading a model) is left to the first reply.
    """
    name = settings.CHAT_ENGINE
    return None if name in BACKENDS else _unknown_engine(name)


def get_engine(name: str | None = None) -> Engine:
    """The process-wide engine for `name` (default: settings.CHAT_ENGINE), built on first use.

    Raises ImproperlyConfigured for an unknown name or an engine that cannot be built (a missing
    GGUF file, vllm not installed).
    """
    name = name or settings.CHAT_ENGINE
    if name not in BACKENDS:
        raise ImproperlyConfigured(_unknown_engine(name))
    with _lock:
        if name not in _engines:
            module = importlib.import_module(BACKENDS[name])
            _engines[name] = module.build_engine()
        return _engines[name]


def reset_engines() -> None:
    """Forget built engines, so changed settings take effect (tests use this)."""
    with _lock:
        _engines.clear()

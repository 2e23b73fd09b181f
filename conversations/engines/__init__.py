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


def get_engine(name: str | None = None) -> Engine:
    """The process-wide engine for `name` (default: settings.CHAT_ENGINE), built on first use."""
    name = name or settings.CHAT_ENGINE
    if name not in BACKENDS:
        raise ImproperlyConfigured(
            f"CHAT_ENGINE={name!r} is not a known engine; choose one of {', '.join(BACKENDS)}."
        )
    with _lock:
        if name not in _engines:
            module = importlib.import_module(BACKENDS[name])
            _engines[name] = module.build_engine()
        return _engines[name]


def reset_engines() -> None:
    """Forget built engines, so changed settings take effect (tests use this)."""
    with _lock:
        _engines.clear()

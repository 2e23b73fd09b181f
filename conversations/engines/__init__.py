"""Engine registry: a backend's module is imported only when it is selected.

Adding a backend is one new file in this package and one line in BACKENDS.

An engine is built (cheap) on first use and loaded (its model: seconds to minutes) on a thread of
its own, once per process: at start-up (`start_loading`, from the ASGI module) or when the first
reply needs it (`loaded`), never on the event loop, which must go on serving pages, sockets and
other replies meanwhile. Built engines are closed when the process exits (`close_engines`): vLLM
starts processes of its own that would otherwise outlive it.
"""

from __future__ import annotations

import asyncio
import atexit
import importlib
import logging
import threading
from concurrent.futures import Future

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from conversations.engines.base import Engine

BACKENDS = {
    "scripted": "conversations.engines.scripted",
    "llamacpp": "conversations.engines.llamacpp",
    "openai": "conversations.engines.openai",
    "vllm": "conversations.engines.vllm",
}

logger = logging.getLogger("chatsite.engines")

_engines: dict[str, Engine] = {}
_loads: dict[str, Future[None]] = {}  # by engine name: its model's load, under way or done
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


def start_loading(name: str | None = None) -> Future[None]:
    """Load the engine's model on a thread of its own unless that is done or under way; the
    future is done when it is loaded. A load that failed is tried again by the next call."""
    engine = get_engine(name)
    with _lock:
        load = _loads.get(engine.name)
        if load is None or (load.done() and load.exception() is not None):
            load = _loads[engine.name] = Future()
            load.set_running_or_notify_cancel()  # running: a waiter that gives up cannot cancel it
            threading.Thread(
                target=_load, args=(engine, load), name=f"load-{engine.name}", daemon=True
            ).start()
        return load


def _load(engine: Engine, load: Future[None]) -> None:
    logger.info("loading the %s engine's model %s", engine.name, engine.model)
    try:
        engine.load()
    except BaseException as exc:
        logger.error("the %s engine could not load: %s", engine.name, exc)
        load.set_exception(exc)
    else:
        logger.info("the %s engine is ready", engine.name)
        load.set_result(None)


def start_loading_at_startup() -> None:
    """Start loading the configured engine as the process starts; a problem is logged (and the
    system check has said what is wrong), and each send reports it to its user."""
    try:
        start_loading()
    except ImproperlyConfigured as exc:
        logger.error("the engine is not available: %s", exc)


async def loaded(engine: Engine) -> None:
    """Wait, without holding the event loop, until the engine's model is loaded."""
    await asyncio.wrap_future(start_loading(engine.name))


def close_engines() -> None:
    """Close every built engine (at process exit; tests, through reset_engines)."""
    with _lock:
        engines = list(_engines.values())
        _engines.clear()
        _loads.clear()
    for engine in engines:
        try:
            engine.close()
        except Exception:
            logger.exception("could not close the %s engine", engine.name)


atexit.register(close_engines)


def reset_engines() -> None:
    """Close and forget built engines, so changed settings take effect (tests use this)."""
    close_engines()

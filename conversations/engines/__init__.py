"""Engine registry: a backend's module is imported only when it is selected.

Adding a backend is one new file in this package and one line in BACKENDS (backends.py).

An engine is built (cheap) on first use and loaded (its model: seconds to minutes) on a thread of
its own, once per process: at start-up (catalogue.start_loading_at_startup, from the ASGI module) or when the first
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

from conversations.engines.backends import BACKENDS
from conversations.engines.base import Engine
from conversations.engines.specs import ModelSpec, legacy_spec

logger = logging.getLogger("chatsite.engines")

_engines: dict[str, Engine] = {}  # by ModelSpec.engine_key: one engine per model per process
_loads: dict[str, Future[None]] = {}  # by engine key: its model's load, under way or done
_lock = threading.Lock()


def _unknown_engine(name: object) -> str:
    return f"CHAT_ENGINE={name!r} is not a known engine; choose one of {', '.join(BACKENDS)}."


def check_engine_setting() -> str | None:
    """What is wrong with settings.CHAT_ENGINE, for a system check; None if it names a backend.

    Only the name is checked: building the engine (loading a model) is left to the first reply.
    """
    if settings.CHAT_MODELS.strip():
        return None  # the declared models are checked instead (conversations.engines.catalogue)
    name = settings.CHAT_ENGINE
    return None if name in BACKENDS else _unknown_engine(name)


def _spec(model: ModelSpec | str | None) -> ModelSpec:
    """A backend's name stands for the single-engine settings' model on that backend."""
    if isinstance(model, ModelSpec):
        return model
    if model is not None and model not in BACKENDS:
        raise ImproperlyConfigured(_unknown_engine(model))
    spec = legacy_spec(model)
    if spec.backend not in BACKENDS:
        raise ImproperlyConfigured(_unknown_engine(spec.backend))
    return spec


def _check_backend(spec: ModelSpec) -> None:
    if spec.backend not in BACKENDS:
        raise ImproperlyConfigured(
            f"The model {spec.slug!r} names the backend {spec.backend!r}, which is not one of "
            f"{', '.join(BACKENDS)}."
        )


def get_engine(model: ModelSpec | str | None = None) -> Engine:
    """The process-wide engine of a model (default: the single-engine settings' one), built on
    first use and shared by all its replies. A backend's name picks that backend with the
    single-engine settings.

    Raises ImproperlyConfigured for an unknown backend or an engine that cannot be built (a
    missing GGUF file, vllm not installed).
    """
    spec = _spec(model)
    _check_backend(spec)
    with _lock:
        engine = _engines.get(spec.engine_key)
    if engine is not None:
        return engine
    # Built outside the registry's lock: importing a backend (vllm: seconds) must not hold up
    # every other model's sends. Two first uses may both build; the first one in is kept.
    module = importlib.import_module(BACKENDS[spec.backend])
    built = module.build_engine(spec)
    with _lock:
        engine = _engines.setdefault(spec.engine_key, built)
    if engine is not built:
        built.close()
    return engine


def start_loading(model: ModelSpec | str | None = None) -> Future[None]:
    """Load the model's engine on a thread of its own unless that is done or under way; the
    future is done when it is loaded. A load that failed is tried again by the next call."""
    spec = _spec(model)
    engine = get_engine(spec)
    with _lock:
        load = _loads.get(spec.engine_key)
        if load is None or (load.done() and load.exception() is not None):
            load = _loads[spec.engine_key] = Future()
            load.set_running_or_notify_cancel()  # running: a waiter that gives up cannot cancel it
            threading.Thread(
                target=_load, args=(engine, load), name=f"load-{spec.slug}", daemon=True
            ).start()
        return load


def load_state(spec: ModelSpec) -> str:
    """How the model's engine stands in this process: "ready", "loading", "failed" (its load
    failed, or its server was unreachable when last tried) or "idle" (not asked for yet)."""
    with _lock:
        engine = _engines.get(spec.engine_key)
        load = _loads.get(spec.engine_key) if engine is not None else None
    if load is None:
        return "idle"
    if not load.done():
        return "loading"
    if load.exception() is not None or not getattr(engine, "reachable", True):
        return "failed"
    return "ready"


def shown_name(spec: ModelSpec) -> str:
    """The name users see the model by: its spec's, or for a model named only by its backend
    (CHAT_ENGINE=openai, no model id, no CHAT_MODEL_NAME) the id its server serves, once this
    process's engine has asked for it."""
    if spec.named_by_server:
        with _lock:
            engine = _engines.get(spec.engine_key)
        if engine is not None and engine.model:
            return engine.model
    return spec.name


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


async def loaded(model: ModelSpec) -> None:
    """Wait, without holding the event loop, until the model's engine is loaded."""
    await asyncio.wrap_future(start_loading(model))


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

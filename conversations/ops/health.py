"""/healthz and /readyz, for load balancers and orchestrators.

/healthz: the process answers (a liveness probe; it touches nothing else, so a database outage
does not get every web process restarted). /readyz: this process can serve chats now: the
database and the channel layer answer, and every enabled model is loaded (or, for a model served
elsewhere, its server answers). Both are JSON; /readyz answers 503 until all is well. Problems
are named, their details only logged: the probe needs no login. So staff see each model by name
and everyone else a count by state (a model's name can say which groups it serves).

One probe's answer serves every /readyz of the next READY_CACHE_S seconds: asking it a
thousand times costs one query, one channel-layer send and one request to each model's server.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import Counter
from collections.abc import Awaitable
from dataclasses import dataclass
from time import monotonic

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.urls import path
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from conversations import engines
from conversations.engines import catalogue, specs
from conversations.engines.base import RemoteEngine

logger = logging.getLogger("chatsite.health")

CHECK_TIMEOUT_S = 3.0  # a probe waits no longer than this for any one check
READY_CACHE_S = 2.0  # how long one probe's answer serves /readyz


@require_GET
@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


@dataclass(frozen=True)
class Readiness:
    database: str
    channel_layer: str
    models: dict[str, str]  # by slug: ready, loading, unavailable or timeout

    @property
    def ready(self) -> bool:
        checks = (self.database, self.channel_layer)
        return checks == ("ok", "ok") and all(s == "ready" for s in self.models.values())


async def probe() -> Readiness:
    """Ask the database, the channel layer and every enabled model now."""
    database, layer, models = await asyncio.gather(
        _bounded(_database()), _bounded(_channel_layer()), _models()
    )
    return Readiness(database, layer, models)


class LastProbe:
    """The last probe's answer, kept READY_CACHE_S. Probes asked while one runs on the same
    event loop wait for it rather than start their own (the test client gives each request a
    loop of its own: those share the answer, not the run)."""

    def __init__(self) -> None:
        self.answer: Readiness | None = None
        self.answered_at = 0.0
        self.running: asyncio.Task[Readiness] | None = None

    async def latest(self) -> Readiness:
        if self.answer is not None and monotonic() - self.answered_at < READY_CACHE_S:
            return self.answer
        loop = asyncio.get_running_loop()
        running = self.running
        if running is None or running.done() or running.get_loop() is not loop:
            running = self.running = loop.create_task(self._probe())
        # Shielded: a prober that hangs up does not cancel the answer the others wait for.
        return await asyncio.shield(running)

    async def _probe(self) -> Readiness:
        answer = await probe()
        self.answer, self.answered_at = answer, monotonic()
        return answer


_last_probe = LastProbe()


def forget_probe() -> None:
    """Make the next /readyz probe afresh (changed settings take effect: tests use this)."""
    global _last_probe
    _last_probe = LastProbe()


@require_GET
@never_cache
async def readyz(request: HttpRequest) -> JsonResponse:
    readiness = await _last_probe.latest()
    user = await request.auser()
    models: dict[str, str] | dict[str, int] = readiness.models
    if not user.is_staff:
        models = dict(Counter(readiness.models.values()))
    return JsonResponse(
        {
            "status": "ok" if readiness.ready else "unavailable",
            "database": readiness.database,
            "channel_layer": readiness.channel_layer,
            "models": models,
        },
        status=200 if readiness.ready else 503,
    )


async def _bounded(check: Awaitable[str]) -> str:
    try:
        async with asyncio.timeout(CHECK_TIMEOUT_S):
            return await check
    except TimeoutError:
        return "timeout"


async def _database() -> str:
    def query() -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")

    try:
        await sync_to_async(query)()
    except Exception:
        logger.exception("readyz: the database did not answer")
        return "unavailable"
    return "ok"


async def _channel_layer() -> str:
    layer = get_channel_layer()
    if layer is None:
        return "unavailable"
    try:
        # A message to a channel nobody reads: it expires on its own.
        await layer.send(f"readyz.{uuid.uuid4().hex}", {"type": "readyz.probe"})
    except Exception:
        logger.exception("readyz: the channel layer did not answer")
        return "unavailable"
    return "ok"


async def _models() -> dict[str, str]:
    try:
        every = await sync_to_async(catalogue.all_models)()
    except Exception:
        logger.exception("readyz: could not list the models")
        return {"*": "unavailable"}
    enabled = [spec for spec in every if spec.enabled]
    states = await asyncio.gather(*(_bounded(_model(spec)) for spec in enabled))
    return dict(zip((spec.slug for spec in enabled), states, strict=True))


async def _model(spec: specs.ModelSpec) -> str:
    """ready, loading, unavailable (its load failed, or its server does not answer)."""
    try:
        engine = engines.get_engine(spec)
        # A model added since start-up starts loading now; the next probe sees how it went.
        load = engines.start_loading(spec)
    except Exception:
        logger.exception("readyz: the model %s cannot be built", spec.slug)
        return "unavailable"
    if not load.done():
        return "loading"
    if load.exception() is not None:
        return "unavailable"
    if isinstance(engine, RemoteEngine):
        problem = await engine.unreachable()
        if problem:
            logger.warning("readyz: the model %s is unreachable: %s", spec.slug, problem)
            return "unavailable"
    return "ready"


urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("readyz", readyz, name="readyz"),
]

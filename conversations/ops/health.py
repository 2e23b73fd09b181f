"""/healthz and /readyz, for load balancers and orchestrators.

/healthz: the process answers (a liveness probe; it touches nothing else, so a database outage
does not get every web process restarted). /readyz: this process can serve chats now: the
database and the channel layer answer, and every enabled model is loaded (or, for a model served
elsewhere, its server answers). Both are JSON; /readyz answers 503 until all is well. Problems
are named, their details only logged: the probe may be public.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable

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


@require_GET
@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


@require_GET
@never_cache
async def readyz(request: HttpRequest) -> JsonResponse:
    database, layer, models = await asyncio.gather(
        _bounded(_database()), _bounded(_channel_layer()), _models()
    )
    ready = database == "ok" and layer == "ok" and all(s == "ready" for s in models.values())
    return JsonResponse(
        {
            "status": "ok" if ready else "unavailable",
            "database": database,
            "channel_layer": layer,
            "models": models,
        },
        status=200 if ready else 503,
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

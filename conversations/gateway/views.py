"""The gateway's Chat Completions and Models endpoints: thin async views over gateway.endpoints.

A refused call (a parameter, a limit, a model) is an HTTP error an SDK raises on. A streamed
reply's headers and first chunk (the role) go out as soon as the send is saved, while the engine
starts: what the middleware costs on the way out then overlaps the engine's first token instead
of delaying it. A failure after that is an error event in the stream. Django's ASGI handler
cancels the response when the client disconnects; CallReply.release then stops the engine. The
same happens when the call's token is revoked (gateway.revocation), and the response ends with a
`token_revoked` error.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from channels.db import database_sync_to_async
from django.http import HttpRequest, HttpResponseBase, JsonResponse

from conversations import engines
from conversations.engines import catalogue, specs
from conversations.gateway import auth, sse
from conversations.gateway.endpoints import (
    Begun,
    begin_call,
    endpoint,
    model_of,
    respond,
    revoked,
    succeeded,
)
from conversations.gateway.errors import GatewayError
from conversations.gateway.revocation import revoked_error
from conversations.gateway.wire import parse_chat_call


@endpoint("POST")
async def chat_completions(request: HttpRequest) -> HttpResponseBase:
    begun = await begin_call(request, parse_chat_call)
    reply, call = begun.reply, begun.call
    completion = sse.Completion.of(
        reply.plan.request_id, int(time.time()), begun.model.slug, call.include_usage
    )
    return await respond(begun, lambda: _events(begun, completion), completion.whole)


async def _events(begun: Begun, completion: sse.Completion) -> AsyncIterator[bytes]:
    reply = begun.reply
    try:
        yield completion.chunk({"role": "assistant", "content": ""})
        while (text := await reply.next_text()) is not None:
            yield completion.chunk({"content": text})
        if revoked(reply):
            yield sse.event(revoked_error().body())
            return
        try:
            saved = succeeded(reply)
        except GatewayError as failure:
            yield sse.event(failure.body())
            return
        if saved["tool_calls"]:
            yield completion.chunk({"tool_calls": sse.tool_call_deltas(saved)})
        yield completion.chunk({}, finish=sse.finish_reason(saved))
        if completion.include_usage:
            yield completion.usage_chunk(saved)
        yield sse.DONE
    finally:
        await begun.close()  # before the end: the client closed the stream or went away


@endpoint("GET")
async def model_list(request: HttpRequest) -> HttpResponseBase:
    owner = await auth.caller(request)
    models = await database_sync_to_async(catalogue.models_for)(owner)
    return JsonResponse({"object": "list", "data": [_model_object(spec) for spec in models]})


@endpoint("GET")
async def model_detail(request: HttpRequest, model: str) -> HttpResponseBase:
    owner = await auth.caller(request)
    return JsonResponse(_model_object(await model_of(owner, model)))


def _model_object(spec: specs.ModelSpec) -> dict[str, Any]:
    # `created` is when the model was made, which chatsite does not know: 0.
    return {
        "id": spec.slug,
        "object": "model",
        "created": 0,
        "owned_by": "chatsite",
        "name": engines.shown_name(spec),  # as the page names it
    }


@endpoint("GET", "POST", "DELETE")
async def not_served(request: HttpRequest, rest: str) -> HttpResponseBase:
    raise GatewayError(
        404,
        f"/v1/{rest} is not served here: the gateway answers /v1/chat/completions and /v1/models.",
        code="unknown_url",
    )

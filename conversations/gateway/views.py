"""The gateway's endpoints: thin async views over gateway.calls.

csrf_exempt, since these views authenticate by token only (see gateway.auth): no cookie is read,
so a page on another site has nothing of the user's to send.

A refused call (a parameter, a limit, a model) is an HTTP error an SDK raises on. A streamed
reply's headers and first chunk (the role) go out as soon as the send is saved, while the engine
starts: what the middleware costs on the way out then overlaps the engine's first token instead
of delaying it. A failure after that is an error event in the stream. Django's ASGI handler
cancels the response when the client disconnects; CallReply.release then stops the engine. The
same happens when the call's token is revoked (gateway.revocation), and the response ends with a
`token_revoked` error.

Every response says its request id in x-request-id (gateway.request_ids); a refusal is logged
with it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.http import HttpRequest, HttpResponseBase, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from conversations.engines import catalogue, specs
from conversations.events.protocol import MessagePayload
from conversations.gateway import auth, sse, tools
from conversations.gateway.calls import CallReply, call_start
from conversations.gateway.errors import (
    RETRY_ENGINE_S,
    SERVER_ERROR,
    GatewayError,
    bad_request,
    model_not_found,
)
from conversations.gateway.files import read_call_files
from conversations.gateway.request_ids import adopt_reply_id, request_id_of
from conversations.gateway.revocation import TOKEN_REVOKED, RevocationWatch, revoked_error
from conversations.gateway.wire import parse_chat_call, parse_conversation_header
from conversations.types import User

CONVERSATION_HEADER = "X-Chatsite-Conversation"
# Proxies must pass each event on as it comes (nginx buffers unless told not to).
STREAM_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
LARGE_BODY = 1 << 20  # bytes of body parsed on a thread rather than on the event loop

View = Callable[..., Coroutine[Any, Any, HttpResponseBase]]

logger = logging.getLogger("chatsite.gateway")


def endpoint(*methods: str) -> Callable[[View], View]:
    """An async gateway view: token-only (csrf_exempt), its refusals as OpenAI error objects."""

    def decorate(view: View) -> View:
        @functools.wraps(view)
        async def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
            try:
                if request.method not in methods:
                    raise GatewayError(
                        405,
                        f"{request.path} answers {' and '.join(methods)} only.",
                        code="method_not_allowed",
                        headers={"Allow": ", ".join(methods)},
                    )
                return await view(request, *args, **kwargs)
            except GatewayError as refusal:
                logger.info(
                    "refused request_id=%s %s %s status=%s code=%s",
                    request_id_of(request),
                    request.method,
                    request.path,
                    refusal.status,
                    refusal.code,
                )
                return refusal.response()

        return csrf_exempt(wrapper)

    return decorate


@endpoint("POST")
async def chat_completions(request: HttpRequest) -> HttpResponseBase:
    token = await auth.caller_token(request)
    owner = token.user
    # Read here rather than through request.body, which holds every route to Django's 2.5 MB:
    # this route's own limit (CHAT_GATEWAY_MAX_BODY_BYTES, room for files) was applied before
    # the body was read (chatsite/body_limits.py).
    body = request.read()
    if len(body) > settings.CHAT_GATEWAY_MAX_BODY_BYTES:  # a server in front of no limit
        raise GatewayError(413, "The request body is too large.", code="too_large")
    # A body with files is megabytes of JSON and base64: parsed on a thread, off the loop.
    call = (
        await asyncio.to_thread(parse_chat_call, body)
        if len(body) > LARGE_BODY
        else parse_chat_call(body)
    )
    conversation_id = parse_conversation_header(request.headers.get(CONVERSATION_HEADER))
    record = token.records_calls and not _housekeeping(request)
    if conversation_id is not None and not record:
        raise bad_request(
            "This call keeps no conversation (the server or the token records no calls, or it is "
            f"marked as housekeeping), so {CONVERSATION_HEADER} cannot be used.",
            code="recording_off",
        )
    model = await _model(owner, call.model)
    offered, choice = tools.for_model(call.tools, call.tool_choice, model)
    call = dataclasses.replace(call, tools=offered, tool_choice=choice)
    reply = await call_start(
        token=token,
        call=call,
        model=model,
        conversation_id=conversation_id,
        client=request.headers.get("User-Agent", ""),
        record=record,
        files=await read_call_files(call, model),
    )
    adopt_reply_id(request, reply.plan.request_id)
    watch = RevocationWatch(token.pk, reply.running)
    completion = sse.Completion.of(
        reply.plan.request_id, int(time.time()), model.slug, call.include_usage
    )
    headers = {CONVERSATION_HEADER: str(reply.plan.conversation_id)}
    if call.stream:
        return StreamingHttpResponse(
            _events(reply, completion, watch),
            content_type="text/event-stream",
            headers={**headers, **STREAM_HEADERS},
        )
    try:
        while await reply.next_text() is not None:
            pass
        if _revoked(reply):
            raise revoked_error()
        return JsonResponse(completion.whole(_succeeded(reply)), headers=headers)
    finally:
        await watch.close()
        await reply.release()  # also when the client left while we waited: stops it


def _housekeeping(request: HttpRequest) -> bool:
    """A call the client marks as its own housekeeping (a title or tag request): not recorded."""
    header = settings.CHAT_GATEWAY_HOUSEKEEPING_HEADER
    return bool(header and request.headers.get(header, "").strip())


async def _events(
    reply: CallReply, completion: sse.Completion, watch: RevocationWatch
) -> AsyncIterator[bytes]:
    try:
        yield completion.chunk({"role": "assistant", "content": ""})
        while (text := await reply.next_text()) is not None:
            yield completion.chunk({"content": text})
        if _revoked(reply):
            yield sse.event(revoked_error().body())
            return
        try:
            saved = _succeeded(reply)
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
        await watch.close()
        await reply.release()  # before the end: the client closed the stream or went away


def _revoked(reply: CallReply) -> bool:
    """The reply was stopped because the call's token was revoked (not by a Stop before)."""
    return reply.saved is not None and reply.saved["cancelled_by"] == TOKEN_REVOKED


def _succeeded(reply: CallReply) -> MessagePayload:
    """The saved reply of a call that is over, or the GatewayError saying why there is none."""
    saved = reply.saved
    if saved is None:
        raise GatewayError(
            409,
            "The conversation was deleted while the reply was written.",
            code="conversation_deleted",
        )
    # The engine, or the server it calls, failed: a gateway's failure upstream (502), not ours
    # (500). Another try is a new engine call, which can succeed: the SDKs retry, after this.
    retry = {"Retry-After": str(RETRY_ENGINE_S)}
    if saved["status"] == "error":
        raise GatewayError(
            502, saved["error"], type=SERVER_ERROR, code="engine_error", headers=retry
        )
    if saved["status"] == "interrupted":
        raise GatewayError(
            503,
            "The server stopped while it wrote the reply.",
            type=SERVER_ERROR,
            code="interrupted",
            headers=retry,
        )
    return saved  # complete, or stopped (see sse.finish_reason)


async def _model(owner: User, slug: str) -> specs.ModelSpec:
    try:
        spec: specs.ModelSpec = await database_sync_to_async(catalogue.model_for)(owner, slug)
    except specs.ModelUnavailable:
        raise model_not_found(slug) from None
    return spec


@endpoint("GET")
async def model_list(request: HttpRequest) -> HttpResponseBase:
    owner = await auth.caller(request)
    models = await database_sync_to_async(catalogue.models_for)(owner)
    return JsonResponse({"object": "list", "data": [_model_object(spec) for spec in models]})


@endpoint("GET")
async def model_detail(request: HttpRequest, model: str) -> HttpResponseBase:
    owner = await auth.caller(request)
    return JsonResponse(_model_object(await _model(owner, model)))


def _model_object(spec: specs.ModelSpec) -> dict[str, Any]:
    # `created` is when the model was made, which chatsite does not know: 0.
    return {
        "id": spec.slug,
        "object": "model",
        "created": 0,
        "owned_by": "chatsite",
        "name": spec.name,
    }


@endpoint("GET", "POST", "DELETE")
async def responses(request: HttpRequest, rest: str = "") -> HttpResponseBase:
    # Newer SDK code calls the Responses API first; say plainly what to call instead.
    raise GatewayError(
        404,
        "The Responses API (/v1/responses) is not served here: send the same conversation to "
        "/v1/chat/completions (client.chat.completions.create), which this server answers.",
        code="unknown_url",
    )


@endpoint("GET", "POST", "DELETE")
async def not_served(request: HttpRequest, rest: str) -> HttpResponseBase:
    raise GatewayError(
        404,
        f"/v1/{rest} is not served here: the gateway answers /v1/chat/completions and /v1/models.",
        code="unknown_url",
    )

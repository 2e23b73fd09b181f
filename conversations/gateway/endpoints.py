"""What every gateway endpoint shares: token-only views whose refusals are OpenAI error objects,
and a call begun from its body (checked, its model's, saved and its reply started), then read to
its end.

csrf_exempt, since these views authenticate by token only (see gateway.auth): no cookie is read,
so a page on another site has nothing of the user's to send. Every response says its request id
in x-request-id (gateway.request_ids); a refusal is logged with it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.http import HttpRequest, HttpResponseBase, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from conversations.engines import catalogue, specs
from conversations.events.payloads import MessagePayload
from conversations.gateway import auth, tools
from conversations.gateway.call_reply import CallReply
from conversations.gateway.calls import call_start
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
from conversations.gateway.wire import ChatCall, parse_conversation_header
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


@dataclass(frozen=True)
class Begun:
    """A call saved and its reply started: what its response reads, and says in its headers."""

    call: ChatCall
    model: specs.ModelSpec
    reply: CallReply
    watch: RevocationWatch  # closed with the response (see gateway.revocation)

    @property
    def headers(self) -> dict[str, str]:
        return {CONVERSATION_HEADER: str(self.reply.plan.conversation_id)}

    async def close(self) -> None:
        await self.watch.close()
        await self.reply.release()  # also when the client left while we waited: stops it


async def begin_call(request: HttpRequest, parse: Callable[[bytes], ChatCall]) -> Begun:
    """The call in the request's body (`parse`: its API's reading of it), saved, its reply
    started; a GatewayError if it is refused."""
    token = await auth.caller_token(request)
    # Read here rather than through request.body, which holds every route to Django's 2.5 MB:
    # this route's own limit (CHAT_GATEWAY_MAX_BODY_BYTES, room for files) was applied before
    # the body was read (chatsite/body_limits.py).
    body = request.read()
    if len(body) > settings.CHAT_GATEWAY_MAX_BODY_BYTES:  # a server in front of no limit
        raise GatewayError(413, "The request body is too large.", code="too_large")
    # A body with files is megabytes of JSON and base64: parsed on a thread, off the loop.
    call = await asyncio.to_thread(parse, body) if len(body) > LARGE_BODY else parse(body)
    conversation_id = parse_conversation_header(request.headers.get(CONVERSATION_HEADER))
    record = token.records_calls and not _housekeeping(request)
    if conversation_id is not None and not record:
        raise bad_request(
            "This call keeps no conversation (the server or the token records no calls, or it is "
            f"marked as housekeeping), so {CONVERSATION_HEADER} cannot be used.",
            code="recording_off",
        )
    model = await model_of(token.user, call.model)
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
    return Begun(call, model, reply, RevocationWatch(token.pk, reply.running))


async def respond(
    begun: Begun,
    events: Callable[[], AsyncIterator[bytes]],
    whole: Callable[[MessagePayload], dict[str, Any]],
) -> HttpResponseBase:
    """The call's answer in its API's shape: streamed, its `events` (which close `begun` at
    their end); else, once the reply is over, `whole` of it as saved."""
    if begun.call.stream:
        return StreamingHttpResponse(
            events(), content_type="text/event-stream", headers={**begun.headers, **STREAM_HEADERS}
        )
    try:
        while await begun.reply.next_text() is not None:
            pass
        if revoked(begun.reply):
            raise revoked_error()
        return JsonResponse(whole(succeeded(begun.reply)), headers=begun.headers)
    finally:
        await begun.close()


def _housekeeping(request: HttpRequest) -> bool:
    """A call the client marks as its own housekeeping (a title or tag request): not recorded."""
    header = settings.CHAT_GATEWAY_HOUSEKEEPING_HEADER
    return bool(header and request.headers.get(header, "").strip())


def revoked(reply: CallReply) -> bool:
    """The reply was stopped because the call's token was revoked (not by a Stop before)."""
    return reply.saved is not None and reply.saved["cancelled_by"] == TOKEN_REVOKED


def succeeded(reply: CallReply) -> MessagePayload:
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


async def model_of(owner: User, slug: str) -> specs.ModelSpec:
    try:
        spec: specs.ModelSpec = await database_sync_to_async(catalogue.model_for)(owner, slug)
    except specs.ModelUnavailable:
        raise model_not_found(slug) from None
    return spec

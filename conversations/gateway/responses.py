"""`POST /v1/responses`: OpenAI's Responses API for plain text, over the same calls as the Chat
Completions endpoint (gateway.endpoints): recorded, limited, stoppable and revocable alike.

Streamed, the response is the Responses API's events: response.created and in_progress, the
message's output item and text part added, a response.output_text.delta per piece of text as
the generation sends it, then the text, part and item done, and response.completed (or
response.incomplete: cut at max_output_tokens, or stopped). A failure after the first event is
an `error` event, and the stream ends there.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

from django.http import HttpRequest, HttpResponseBase

from conversations.gateway.endpoints import (
    Begun,
    begin_call,
    endpoint,
    respond,
    revoked,
    succeeded,
)
from conversations.gateway.errors import GatewayError
from conversations.gateway.responses_wire import ResponseShape, parse_response_call
from conversations.gateway.revocation import revoked_error


@endpoint("POST")
async def responses(request: HttpRequest) -> HttpResponseBase:
    begun = await begin_call(request, parse_response_call)
    shape = ResponseShape.of(
        begun.reply.plan.request_id, int(time.time()), begun.model.slug, begun.call
    )
    return await respond(begun, lambda: _events(begun, shape), shape.whole)


async def _events(begun: Begun, shape: ResponseShape) -> AsyncIterator[bytes]:
    reply = begun.reply
    try:
        for event in shape.start():
            yield event
        while (text := await reply.next_text()) is not None:
            yield shape.delta(text)
        try:
            if revoked(reply):
                raise revoked_error()
            saved = succeeded(reply)
        except GatewayError as failure:
            yield shape.failure(failure)
            return
        for event in shape.end(saved):
            yield event
    finally:
        await begun.close()  # before the end: the client closed the stream or went away


@endpoint("GET", "POST", "DELETE")
async def stored_response(request: HttpRequest, rest: str) -> HttpResponseBase:
    raise GatewayError(
        404,
        f"/v1/responses/{rest} is not served: responses are not stored here (the conversation "
        "is, in chatsite); send the whole input to POST /v1/responses again.",
        code="unknown_url",
    )

"""x-request-id: one id for each /v1 call, on its response and in the gateway's log lines for it.

A call that got a reply goes by the reply's request id (adopt_reply_id), which every log line
of its generation carries, as does the completion's id (`chatcmpl-<id>`). Any other response (a
refusal, a 404, a preflight) goes by the client's own `X-Request-Id` when it is one that can be
logged as it is (short, printable ASCII without spaces), else by a fresh one.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Awaitable, Callable

from asgiref.sync import iscoroutinefunction
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from django.utils.decorators import sync_and_async_middleware

logger = logging.getLogger("chatsite.gateway")

HEADER = "x-request-id"
MAX_CHARS = 128
_PRINTABLE = re.compile(rf"[!-~]{{1,{MAX_CHARS}}}")  # no space, nothing a log line could split on
_META_KEY = "chatsite.request_id"
GATEWAY_PREFIX = "/v1/"

GetResponse = Callable[[HttpRequest], HttpResponseBase | Awaitable[HttpResponseBase]]


def client_request_id(request: HttpRequest) -> str | None:
    """The client's own X-Request-Id, if it is one to keep."""
    own = request.headers.get("X-Request-Id", "")
    return own if _PRINTABLE.fullmatch(own) else None


def request_id_of(request: HttpRequest) -> str:
    """The request's id: its reply's once it has one, else the client's or a fresh one."""
    found = request.META.get(_META_KEY)
    if found is None:
        found = request.META[_META_KEY] = client_request_id(request) or uuid.uuid4().hex
    return str(found)


def adopt_reply_id(request: HttpRequest, reply_id: str) -> None:
    """The call has a reply: from now on it goes by the reply's id (a client's own is logged
    beside it, so either finds the call's lines)."""
    own = client_request_id(request)
    if own is not None and own != reply_id:
        logger.info("call request_id=%s client_request_id=%s", reply_id, own)
    request.META[_META_KEY] = reply_id


def _with_id(request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
    response[HEADER] = request_id_of(request)
    return response


@sync_and_async_middleware
def request_id_middleware(get_response: GetResponse) -> GetResponse:
    """Every response under /v1/ carries an x-request-id."""
    if iscoroutinefunction(get_response):

        async def middleware(request: HttpRequest) -> HttpResponseBase:
            pending = get_response(request)
            assert not isinstance(pending, HttpResponseBase)
            response: HttpResponseBase = await pending
            if not request.path_info.startswith(GATEWAY_PREFIX):
                return response
            return _with_id(request, response)

        return middleware

    def sync_middleware(request: HttpRequest) -> HttpResponseBase:
        response = get_response(request)
        assert isinstance(response, HttpResponseBase)
        if not request.path_info.startswith(GATEWAY_PREFIX):
            return response
        return _with_id(request, response)

    return sync_middleware

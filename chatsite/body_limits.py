"""Request body limits, applied before the body is read.

Django reads a request's whole body before any view runs (into a temporary file past
FILE_UPLOAD_MAX_MEMORY_SIZE), and DATA_UPLOAD_MAX_MEMORY_SIZE leaves a file upload's part out of
its count: an unauthenticated 300 MB POST was read and stored whole before its 401. So the limit
is applied in front of Django, per route:

- the import's form and POST /api/imports/ may send CHAT_IMPORT_MAX_BYTES and a few fields
  (MULTIPART_ALLOWANCE), as their own check of the Content-Length allows;
- a composer's attachment, CHAT_ATTACHMENT_MAX_BYTES and the same few fields;
- /v1/chat/completions, CHAT_GATEWAY_MAX_BODY_BYTES (a message's files, base64-encoded);
- every other route DATA_UPLOAD_MAX_MEMORY_SIZE (Django's 2.5 MB; None: no limit here), which
  Django already holds form fields and `request.body` to, now the whole body, files included.

A body over its limit is answered 413 from its Content-Length, before a byte of it is read, or,
streamed without one (chunked), as soon as it passes the limit: in JSON on /api/ (`code`,
`detail`) and /v1/ (OpenAI's error shape), in plain text elsewhere, and the connection closed.
BodyLimit does it for the ASGI application (uvicorn streams a body to it as it arrives); daphne
reads a body itself before the application runs, so chatsite/daphne_bodies.py applies the same
limits there. A proxy in front should have its own limit, at least as large
(docs/deploy.md).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from django.conf import settings
from django.urls import Resolver404, resolve

from conversations.gateway.errors import GatewayError
from conversations.imports.importer import MULTIPART_ALLOWANCE, upload_limit
from conversations.services.text import size_in_words

logger = logging.getLogger(__name__)

# The url names of the routes that take an export file: the settings page's form, the API's.
IMPORT_ROUTES = frozenset({"import", "api-import"})
ATTACHMENT_ROUTE = "attachment-upload"
GATEWAY_ROUTE = "gateway-chat-completions"
STATUS = HTTPStatus.REQUEST_ENTITY_TOO_LARGE


@dataclass(frozen=True)
class Route:
    path_info: str
    imports: bool  # one of IMPORT_ROUTES
    attachment: bool = False  # ATTACHMENT_ROUTE
    gateway: bool = False  # GATEWAY_ROUTE

    @property
    def limit(self) -> int | None:
        """The most bytes its body may hold (read from the settings at each request); None:
        no limit."""
        if self.imports:
            return upload_limit()
        if self.attachment:
            return settings.CHAT_ATTACHMENT_MAX_BYTES + MULTIPART_ALLOWANCE
        if self.gateway:
            return int(settings.CHAT_GATEWAY_MAX_BODY_BYTES)
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return None if limit is None else int(limit)


def path_info(path: str, root_path: str) -> str:
    """The path Django routes: without the script prefix (FORCE_SCRIPT_NAME, else the server's
    root path), as django.core.handlers.asgi does."""
    prefix = settings.FORCE_SCRIPT_NAME or root_path
    return (path.removeprefix(prefix) if prefix else path) or "/"


def route_of(path: str) -> Route:
    try:
        name = resolve(path).url_name
    except Resolver404:
        name = None
    return Route(
        path,
        imports=name in IMPORT_ROUTES,
        attachment=name == ATTACHMENT_ROUTE,
        gateway=name == GATEWAY_ROUTE,
    )


@dataclass(frozen=True)
class Refusal:
    """A 413, whole: sent by BodyLimit, or written to the socket by daphne's request."""

    content_type: str
    body: bytes

    def headers(self) -> list[tuple[bytes, bytes]]:
        return [
            (b"content-type", self.content_type.encode()),
            (b"content-length", str(len(self.body)).encode()),
            (b"x-content-type-options", b"nosniff"),
            # The rest of the body is not read: the connection cannot carry another request.
            (b"connection", b"close"),
        ]

    def http_message(self) -> bytes:
        """The response as HTTP/1.1 puts it on the wire."""
        head = [f"HTTP/1.1 {STATUS.value} {STATUS.phrase}".encode()]
        head += [name + b": " + value for name, value in self.headers()]
        return b"\r\n".join(head) + b"\r\n\r\n" + self.body


def refusal(route: Route, size: int | None) -> Refusal:
    """The 413 for a body to `route` of `size` bytes declared, or None: streamed past the
    limit. In the route's words: the import's for an import, JSON on the API and gateway."""
    limit = route.limit or 0
    if route.attachment:
        allowed = size_in_words(settings.CHAT_ATTACHMENT_MAX_BYTES)
        message = f"The file is over {allowed}, the limit of attachments."
    elif route.imports:
        allowed = size_in_words(settings.CHAT_IMPORT_MAX_BYTES)
        if size is None:
            message = f"The upload is over {allowed}, the limit of imports."
        else:
            message = f"The upload is {size_in_words(size)}; imports are limited to {allowed}."
    elif size is None:
        message = f"The request body is over {size_in_words(limit)}, the limit of requests here."
    else:
        message = (
            f"The request body is {size_in_words(size)}; requests here are limited to "
            f"{size_in_words(limit)}."
        )
    logger.info("refused a request body to %s: %s", route.path_info, message)
    if route.path_info.startswith("/v1/"):
        body = GatewayError(int(STATUS), message, code="too_large").body()
    elif route.path_info.startswith("/api/"):
        body = {"code": "too_large", "detail": message}
    else:
        return Refusal("text/plain; charset=utf-8", f"{message}\n".encode())
    return Refusal("application/json", json.dumps(body).encode())


def declared_length(headers: list[tuple[bytes, bytes]]) -> int | None:
    for name, value in headers:
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None  # the server refuses a malformed length itself
    return None


async def answer(send: Any, refused: Refusal) -> None:
    await send({"type": "http.response.start", "status": int(STATUS), "headers": refused.headers()})
    await send({"type": "http.response.body", "body": refused.body})


class BodyLimit:
    """ASGI middleware: an HTTP request whose body is over its route's limit is answered 413
    before the application reads any of it (from its Content-Length), or as soon as a body
    streamed without one passes the limit (the application is then told the client left)."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope["type"] != "http":
            return await self.application(scope, receive, send)
        path = path_info(scope["path"], scope.get("root_path", ""))
        cut_off = CutOff(path, receive, send)
        declared = declared_length(scope.get("headers", []))
        if declared:  # else chunked, or no body at all (most requests): no route looked up yet
            route = cut_off.route = route_of(path)
            limit = route.limit
            if limit is not None and declared > limit:
                return await answer(send, refusal(route, declared))
        return await self.application(scope, cut_off.receive, cut_off.send)


class CutOff:
    """The application's receive and send for one request: the body counted as the
    application takes it and, past the limit (a body streamed without a Content-Length), a 413
    in place of its answer."""

    def __init__(self, path: str, receive: Any, send: Any) -> None:
        self.path = path
        self.route: Route | None = None  # looked up once a body comes
        self._receive, self._send = receive, send
        self.received = 0
        self.refused = False
        self.answering = False  # the application has begun its answer

    async def receive(self) -> dict[str, Any]:
        if self.refused:
            return {"type": "http.disconnect"}
        message: dict[str, Any] = await self._receive()
        if message["type"] == "http.request" and message.get("body"):
            self.received += len(message["body"])
            route = self.route = self.route or route_of(self.path)
            limit = route.limit
            if limit is not None and self.received > limit:
                self.refused = True
                if not self.answering:
                    await answer(self._send, refusal(route, None))
                # Django's handler stops reading and answers nothing.
                return {"type": "http.disconnect"}
        return message

    async def send(self, message: dict[str, Any]) -> None:
        if self.refused:
            return  # answered already, or cut short: the connection closes
        if message["type"] == "http.response.start":
            self.answering = True
        await self._send(message)

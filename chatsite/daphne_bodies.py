"""Request bodies under daphne: limited as they arrive, and left to the application to parse.

Daphne hands a request to the application only once Twisted has read its whole body (into a
temporary file past 100 kB), so chatsite/body_limits.py's middleware would come too late: this
request applies the same limits while the body arrives. A body declared over its route's limit
is refused once the headers are in, before a byte of it is read (and without the
`100 Continue` a client may wait for); one streamed without a Content-Length is refused as soon
as it passes the limit. Either way the 413 is written and the connection closed.

It also turns off Twisted's own parse of a POSTed form: that read the whole body into memory at
once to fill `request.args`, which daphne never reads, and answered a multipart body it could
not parse (one with no parts) with a bare 400, no body and no Content-Type, before the
application saw it.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from daphne import http_protocol
from daphne.http_protocol import WebRequest

from chatsite.body_limits import Route, path_info, refusal, route_of


class LimitedWebRequest(WebRequest):  # type: ignore[misc]  # daphne is untyped
    route: Route | None = None
    received = 0
    refused = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._parsePOSTFormSubmission = False

    def gotLength(self, length: int | None) -> None:
        """The headers are in; `length` is the Content-Length (None: the body is chunked)."""
        if length != 0:  # most requests have no body: no route to look up
            self.route = route = route_of(self._path_info())
            limit = route.limit
            if length is not None and limit is not None and length > limit:
                self._refuse(route, length)
                return
        super().gotLength(length)

    def handleContentChunk(self, data: bytes) -> None:
        if self.refused:
            return  # what the client sent before it saw the 413
        self.received += len(data)
        route = self.route
        limit = route.limit if route else None
        if route and limit is not None and self.received > limit:
            self._refuse(route, None)
        else:
            super().handleContentChunk(data)

    def requestReceived(self, command: bytes, path: bytes, version: bytes) -> None:
        if not self.refused:
            super().requestReceived(command, path, version)

    def _path_info(self) -> str:
        # The request line's target: Twisted keeps it on the channel until the body is in.
        target: bytes = getattr(self.channel, "_path", b"/")
        path = unquote(target.split(b"?", 1)[0].decode("ascii", "replace"))
        header = self.requestHeaders.getRawHeaders(b"daphne-root-path")
        root = unquote(header[0].decode("ascii", "replace")) if header else self.server.root_path
        return path_info(path, root or "")

    def _refuse(self, route: Route, size: int | None) -> None:
        self.refused = True
        # Twisted answers `Expect: 100-continue` once the length is known: no body is wanted.
        self.requestHeaders.removeHeader(b"expect")
        self.channel.transport.write(refusal(route, size).http_message())
        self.channel.loseConnection()


def install() -> None:
    """Make daphne build this request for every HTTP request (before it accepts connections)."""
    # HTTPFactory.buildProtocol names WebRequest as the module's global at each connection.
    http_protocol.WebRequest = LimitedWebRequest

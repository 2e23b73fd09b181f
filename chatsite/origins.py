"""The WebSocket origin check: Django's CSRF origin rule, applied to the socket handshake.

A socket is accepted only when its ``Origin`` header names exactly, as scheme://host:port,

1. the socket's own site: the ``Host`` it was opened on (which must be in ``ALLOWED_HOSTS``), with
   the connection's scheme (``ws`` -> ``http``, ``wss`` -> ``https``; ``https`` also when
   ``SECURE_PROXY_SSL_HEADER`` is set and the proxy's header says so), or
2. an entry of ``CSRF_TRUSTED_ORIGINS`` (``https://*.example.com`` covers its subdomains on that
   scheme and port, as it does for Django's CSRF check).

The same host on another port or scheme is another origin, so it is refused: a page on
``http://127.0.0.1:9999`` cannot open a socket on ``http://127.0.0.1:8000`` with the user's
cookies. A handshake without an ``Origin`` is refused too; browsers always send one, and
non-browser clients (the JSON API clients, the test and bench clients) send their server's origin.
Refusals close the handshake cleanly (HTTP 403 before accept) and are logged at info.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host
from django.utils.http import is_same_domain

logger = logging.getLogger(__name__)

DEFAULT_PORTS = {"http": 80, "https": 443}
Origin = tuple[str, str, int]  # scheme, lower-case host, port (the scheme's default when absent)


def parse_origin(value: str) -> Origin | None:
    try:
        parts = urlsplit(value.strip().lower())
        port = parts.port or DEFAULT_PORTS.get(parts.scheme)
    except ValueError:  # a port that is not a number, or out of range
        return None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname or port is None:
        return None
    if parts.path or parts.query or parts.fragment or parts.username or parts.password:
        return None
    return parts.scheme, parts.hostname, port


def connection_scheme(scope: dict[str, Any], headers: dict[str, str]) -> str:
    """The socket's scheme as Django's ``request.is_secure()`` would see it."""
    proxy_header = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if proxy_header:
        name, secure_value = proxy_header
        # "HTTP_X_FORWARDED_PROTO" -> "x-forwarded-proto"
        value = headers.get(name.removeprefix("HTTP_").replace("_", "-").lower())
        if value is not None:
            return "https" if value.split(",", 1)[0].strip() == secure_value else "http"
    return "https" if scope.get("scheme") in ("wss", "https") else "http"


def own_origin(scope: dict[str, Any], headers: dict[str, str]) -> Origin | None:
    """The origin of the site the socket was opened on, if its Host is one we serve."""
    host = headers.get("host", "")
    domain, _ = split_domain_port(host)
    allowed = settings.ALLOWED_HOSTS
    if settings.DEBUG and not allowed:  # Django's own default with DEBUG on
        allowed = [".localhost", "127.0.0.1", "[::1]"]
    if not domain or not validate_host(domain, allowed):
        return None
    return parse_origin(f"{connection_scheme(scope, headers)}://{host}")


def trusted(origin: Origin) -> bool:
    scheme, host, port = origin
    for entry in settings.CSRF_TRUSTED_ORIGINS:
        if "://*." in entry:  # "https://*.example.com[:port]": its subdomains, same scheme+port
            pattern = parse_origin(entry.replace("://*.", "://", 1))
            if pattern is not None:
                pattern_scheme, domain, pattern_port = pattern
                if (pattern_scheme, pattern_port) == (scheme, port) and is_same_domain(
                    host, f".{domain}"
                ):
                    return True
        elif parse_origin(entry) == origin:
            return True
    return False


def origin_allowed(scope: dict[str, Any]) -> bool:
    headers: dict[str, str] = {}
    for name, value in scope.get("headers", []):
        headers.setdefault(name.decode("latin1").lower(), value.decode("latin1"))
    origin = parse_origin(headers["origin"]) if "origin" in headers else None
    if origin is None:
        return False
    return origin == own_origin(scope, headers) or trusted(origin)


class OriginValidator:
    """ASGI middleware: passes a WebSocket on only when `origin_allowed` says so."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope["type"] == "websocket" and not origin_allowed(scope):
            headers = dict(scope.get("headers", []))
            logger.info(
                "WebSocket refused: origin %r does not match host %r",
                headers.get(b"origin", b"").decode("latin1"),
                headers.get(b"host", b"").decode("latin1"),
            )
            return await WebsocketDenier()(scope, receive, send)
        return await self.application(scope, receive, send)

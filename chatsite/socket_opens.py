"""How often one browser session may open sockets: refused at the handshake, before any query.

Closing a flooding socket (conversations/sockets/throttle.py) only helps if the client cannot open the
next one at once: every open costs the process a handshake, the session and user lookups and the
conversation's, all on the one database thread. A client reconnecting in a loop gets
CHAT_SOCKET_OPENS_PER_MINUTE opens a minute, counted per session cookie (per address when it sends
none) in Django's cache, so every process counts together; the rest are refused with HTTP 403,
which browsers retry with backoff. A proxy in front should also limit new connections per client
address (nginx's `limit_conn`/`limit_req` on the socket path), since a client can invent cookies.
"""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import sync_to_async
from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.cookie import parse_cookie

from conversations.services import ratelimits

logger = logging.getLogger(__name__)

SOCKET_OPEN = "socket-open"


def opener(scope: dict[str, Any]) -> str:
    """Who opens the socket, as far as is known before any query: the session or the address."""
    headers = dict(scope.get("headers", []))
    cookies = parse_cookie(headers.get(b"cookie", b"").decode("latin1"))
    session = cookies.get(settings.SESSION_COOKIE_NAME)
    if session:
        return f"session:{session[:64]}"
    client = scope.get("client") or ("unknown", 0)
    return f"address:{client[0]}"


def open_allowed(who: str) -> bool:
    try:
        used = ratelimits.hit(SOCKET_OPEN, who)
    except Exception as exc:  # the cache is unreachable: let sockets open rather than refuse all
        logger.warning("could not count socket opens: %r", exc)
        return True
    return used.count <= settings.CHAT_SOCKET_OPENS_PER_MINUTE


class SocketOpenLimit:
    """ASGI middleware: refuses a WebSocket handshake over the opener's rate."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope["type"] == "websocket":
            who = opener(scope)
            # Only the cache is touched: off the database thread, which a flood keeps busy.
            if not await sync_to_async(open_allowed, thread_sensitive=False)(who):
                logger.info("WebSocket refused: %s opened too many sockets", who.split(":")[0])
                return await WebsocketDenier()(scope, receive, send)
        return await self.application(scope, receive, send)

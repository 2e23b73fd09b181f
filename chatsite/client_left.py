"""ASGI middleware: an HTTP request's scope says when its client has left.

It gives each request a threading.Event under conversations.imports.departure.CLIENT_LEFT, set
when the server reports `http.disconnect` (Django's handler listens for it while the view runs),
so a long view running in a thread, an import, can stop for a client that is gone.
"""

from __future__ import annotations

import threading
from typing import Any

from conversations.imports.departure import CLIENT_LEFT


class ClientLeft:
    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope["type"] != "http":
            return await self.application(scope, receive, send)
        left = threading.Event()

        async def receive_and_watch() -> dict[str, Any]:
            message: dict[str, Any] = await receive()
            if message["type"] == "http.disconnect":
                left.set()
            return message

        return await self.application({**scope, CLIENT_LEFT: left}, receive_and_watch, send)

"""Whether the client that sent a request is still there, for an import that runs for minutes.

Django's ASGI handler stops waiting for a view when its client leaves, but a sync view runs on
in its thread: an import would go on reading and writing for nobody, holding its slot and its
memory. The project's ASGI stack (chatsite/client_left.py) puts a threading.Event in the
request's scope under CLIENT_LEFT and sets it when the server says the client disconnected; the
import checks it between conversations.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

CLIENT_LEFT = "chatsite.client_left"


def never() -> bool:
    return False


def client_left(request: Any) -> Callable[[], bool]:
    """A check of whether `request`'s client has left (always False off ASGI: a test client, a
    management command)."""
    scope = getattr(request, "scope", None)
    event = scope.get(CLIENT_LEFT) if isinstance(scope, dict) else None
    return event.is_set if isinstance(event, threading.Event) else never

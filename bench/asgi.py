"""chatsite's ASGI application, unchanged, plus one read-only path for the bench.

GET /__bench__/records?ids=a,b hands over (and forgets) what the scripted engine recorded for
those request ids: the wall-clock time of every token it emitted and when it was told to stop.
That is the engine's own view, so the bench can measure from the moment a token left the engine
rather than from a timestamp the web layer took. Nothing on the streaming path changes; the bench
only asks after a measurement. The scripted engine's time.time() and the clients' share one
clock because everything runs on one machine.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs

from chatsite.asgi import application as chatsite_application
from conversations.engines import get_engine

RECORDS_PATH = "/__bench__/records"


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http" or scope["path"] != RECORDS_PATH:
        await chatsite_application(scope, receive, send)
        return
    query = parse_qs(scope.get("query_string", b"").decode())
    wanted = [i for i in ",".join(query.get("ids", [])).split(",") if i]
    records = getattr(get_engine("scripted"), "records", {})
    found = {}
    for request_id in wanted:
        record = records.pop(request_id, None)
        if record is not None:
            found[request_id] = {
                "emit_times": record.emit_times,
                "stop_requested_at": record.stop_requested_at,
                "emitted_after_stop": record.emitted_after_stop,
                "emitted": record.emitted,
                "finished": record.finished,
            }
    body = json.dumps(found).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})

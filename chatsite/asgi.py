"""ASGI entry point: HTTP through Django, WebSockets through Channels with session auth."""

import gc
import os
import signal
import threading
from types import FrameType

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatsite.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402  (needs Django set up first)
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from chatsite import daphne_backpressure, daphne_bodies, daphne_shutdown  # noqa: E402
from chatsite.body_limits import BodyLimit  # noqa: E402
from chatsite.client_left import ClientLeft  # noqa: E402
from chatsite.origins import OriginValidator  # noqa: E402
from chatsite.socket_opens import SocketOpenLimit  # noqa: E402
from conversations.engines import close_engines  # noqa: E402
from conversations.engines.catalogue import start_loading_at_startup  # noqa: E402
from conversations.generation.recovery import mark_interrupted_at_startup  # noqa: E402
from conversations.generation.shutdown import (  # noqa: E402
    save_replies_at_exit,
    save_replies_then,
)
from conversations.sockets.routing import websocket_urlpatterns  # noqa: E402

mark_interrupted_at_startup()
daphne_backpressure.install()
daphne_bodies.install()
daphne_shutdown.install()
# runserver's (make run), see its docstring: before the interpreter's own exit work, which stops
# every thread pool (the final saves' database thread among them) before atexit's handlers run.
threading._register_atexit(save_replies_at_exit)  # type: ignore[attr-defined]  # no public hook
# The model loads on a thread of its own now, not in the first reply (which waits for it).
start_loading_at_startup()


def close_engines_on_sigterm() -> None:
    """Save the replies being written and close the engines when SIGTERM arrives, then let the
    server's own handler shut it down.

    Engines are closed at exit (atexit), but uvicorn ends its process by raising SIGTERM again
    with the default action once it has shut down, and no exit handler runs: vLLM's engine core
    and worker processes were left running. That second SIGTERM comes here, while the event loop
    still runs the replies being written: they are saved before the default action ends the
    process (see conversations.generation.shutdown). (Daphne's Twisted installs its handler after
    this one and exits normally, through atexit; chatsite.daphne_shutdown saves its replies.)
    """
    if threading.current_thread() is not threading.main_thread():
        return  # only the main thread may set signal handlers
    server_handler = signal.getsignal(signal.SIGTERM)
    if server_handler is signal.SIG_IGN:
        return
    saving: list[int] = []  # SIGTERMs received

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        def shut_down() -> None:
            close_engines()
            if callable(server_handler):
                server_handler(signum, frame)
            else:  # no server handler: the default action, now that nothing is left behind
                signal.signal(signum, signal.SIG_DFL)
                signal.raise_signal(signum)

        # The replies being written are saved first (bounded), while the loop still runs them;
        # a second SIGTERM meanwhile shuts down at once.
        if saving or not save_replies_then(shut_down):
            shut_down()
        saving.append(signum)

    signal.signal(signal.SIGTERM, on_sigterm)


close_engines_on_sigterm()

application = ProtocolTypeRouter(
    {
        # A body over its route's limit is refused before Django reads it: see
        # chatsite/body_limits.py (and chatsite/daphne_bodies.py, as daphne reads it first). A
        # request's scope says when its client left: see chatsite/client_left.py.
        "http": BodyLimit(ClientLeft(django_asgi_app)),
        # The origin check refuses sockets opened by pages on other origins (cross-site hijacking),
        # including the same host on another port or scheme: see chatsite/origins.py. A client
        # opening socket after socket is refused before any query: see chatsite/socket_opens.py.
        "websocket": SocketOpenLimit(
            OriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns)))
        ),
    }
)

# Everything made so far (Django, the app, their imports) lives as long as the process: frozen
# out of the collector's view, a full collection no longer walks it. Each full collection stops
# every stream of the process; measured with `python -m bench --only latency` on two processes,
# they took 100-150 ms before, 17-37 ms after, and the TTFT p99 with 200 other streams in the
# same process fell from 168 to 8 ms (docs/performance.md).
gc.freeze()

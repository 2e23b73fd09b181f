"""ASGI entry point: HTTP through Django, WebSockets through Channels with session auth."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatsite.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402  (needs Django set up first)
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from chatsite import daphne_backpressure  # noqa: E402
from chatsite.origins import OriginValidator  # noqa: E402
from chatsite.socket_opens import SocketOpenLimit  # noqa: E402
from conversations.engines import start_loading_at_startup  # noqa: E402
from conversations.generation.recovery import mark_interrupted_at_startup  # noqa: E402
from conversations.routing import websocket_urlpatterns  # noqa: E402

mark_interrupted_at_startup()
daphne_backpressure.install()
# The model loads on a thread of its own now, not in the first reply (which waits for it).
start_loading_at_startup()

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        # The origin check refuses sockets opened by pages on other origins (cross-site hijacking),
        # including the same host on another port or scheme: see chatsite/origins.py. A client
        # opening socket after socket is refused before any query: see chatsite/socket_opens.py.
        "websocket": SocketOpenLimit(
            OriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns)))
        ),
    }
)

from django.urls import path, re_path

from conversations.sockets.consumer import ConversationConsumer, NotFoundConsumer
from conversations.sockets.language import SocketLanguage

websocket_urlpatterns = [
    # In the page's language: the errors it sends and the messages it renders.
    path(
        "ws/conversations/<uuid:conversation_id>/",
        SocketLanguage(ConversationConsumer.as_asgi()),
    ),
    # Anything else is closed cleanly (4404) instead of failing in the router with a traceback.
    re_path(r"", NotFoundConsumer.as_asgi()),
]

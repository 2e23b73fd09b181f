from django.urls import path, re_path

from conversations.sockets.consumer import ConversationConsumer, NotFoundConsumer

websocket_urlpatterns = [
    path("ws/conversations/<uuid:conversation_id>/", ConversationConsumer.as_asgi()),
    # Anything else is closed cleanly (4404) instead of failing in the router with a traceback.
    re_path(r"", NotFoundConsumer.as_asgi()),
]

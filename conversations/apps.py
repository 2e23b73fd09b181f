import logging

from django.apps import AppConfig
from django.conf import settings


class ConversationsConfig(AppConfig):
    name = "conversations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        if not settings.REDIS_URL:
            logging.getLogger("chatsite").info(
                "REDIS_URL is not set: using the in-memory channel layer, which works in a single "
                "process only. Set REDIS_URL to run several processes."
            )

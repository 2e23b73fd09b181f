import logging

from django.apps import AppConfig
from django.conf import settings


class ConversationsConfig(AppConfig):
    name = "conversations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from conversations import checks, signals  # noqa: F401 - registers them
        from conversations.attachments import receivers  # noqa: F401 - files go with their rows
        from conversations.engines import specs  # registers its setting_changed receiver
        from conversations.generation import deprovision  # noqa: F401 - its receivers
        from conversations.services import accounts, audit_receivers  # noqa: F401 - receivers

        # A bad CHAT_MODELS entry stops start-up here, with a message that names it.
        specs.declared_models()

        if not settings.REDIS_URL:
            # A warning in production: several processes without Redis cannot see each other.
            log = logging.getLogger("chatsite")
            (log.info if settings.DEBUG else log.warning)(
                "REDIS_URL is not set: using the in-memory channel layer, which works in a single "
                "process only. Set REDIS_URL to run several processes."
            )

"""The socket's counterpart of LocaleMiddleware: a consumer speaks the page's language.

The language is the one the page was served in (Django's language cookie, else the browser's
Accept-Language: services.languages.socket_language), activated around the whole consumer. It is a
context variable, so the database threads and tasks the consumer starts inherit it: its errors
and the messages it renders are in that language.
"""

from typing import Any

from django.utils import translation

from conversations.services import languages


class SocketLanguage:
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def __call__(self, scope: Any, receive: Any, send: Any) -> Any:
        language = languages.socket_language(
            cookies=scope.get("cookies", {}), headers=scope.get("headers", [])
        )
        with translation.override(language):
            return await self.inner(scope, receive, send)

"""The languages the pages speak; chatsite.settings imports these.

LocaleMiddleware picks one per request (a person's choice in the cookie, else the browser's
Accept-Language, among LANGUAGES); conversations.sockets.language does the same for a socket.
The catalogs are locale/<code>/LC_MESSAGES/django.po and djangojs.po, compiled and committed
(`make messages`).
"""

from pathlib import Path

LANGUAGE_CODE = "en"
# The names are each language's own, as a language menu shows them.
LANGUAGES = [
    ("en", "English"),
    ("zh-hans", "简体中文"),
    ("fr", "Français"),
]
LOCALE_PATHS = [Path(__file__).resolve().parent.parent / "locale"]
USE_I18N = True

"""The language a person reads the pages in: the one they chose, or else their browser's.

A signed-in person's choice is kept with their preferences (so it follows them to every device);
anyone's is also kept in Django's language cookie, which LocaleMiddleware reads before the
browser's Accept-Language. The socket has no request, so it asks `socket_language` the same
questions from its scope: the cookie (which the pages keep equal to the saved choice) and then
Accept-Language, with no trip to the database.
"""

from collections.abc import Iterable, Mapping

from django.conf import settings
from django.utils import translation
from django.utils.translation.trans_real import parse_accept_lang_header

from conversations.models import UserPreferences
from conversations.types import AnyUser, User

CODES = frozenset(code for code, _name in settings.LANGUAGES)


def saved_language(user: AnyUser) -> str:
    """The user's chosen language, or "" when they follow the browser (or are anonymous)."""
    if not user.is_authenticated:
        return ""
    # Cached on the user: the page's theme reads the same row, so this costs no query more.
    preferences: UserPreferences | None = getattr(user, "preferences", None)
    return preferences.language if preferences is not None else ""


def language_set(*, user: User, language: str) -> None:
    """Remembers a signed-in user's language ("" follows the browser again)."""
    if language and language not in CODES:
        raise ValueError(f"{language!r} is not one of LANGUAGES")
    UserPreferences.objects.update_or_create(user=user, defaults={"language": language})


def _supported(code: str) -> str | None:
    try:
        return translation.get_supported_language_variant(code)
    except LookupError:
        return None


def socket_language(*, cookies: Mapping[str, str], headers: Iterable[tuple[bytes, bytes]]) -> str:
    """What LocaleMiddleware picks for a request, from a socket's scope."""
    chosen = cookies.get(settings.LANGUAGE_COOKIE_NAME, "")
    if chosen and (code := _supported(chosen)):
        return code
    accept = next((value for name, value in headers if name == b"accept-language"), b"")
    for tag, _quality in parse_accept_lang_header(accept.decode("latin-1")):
        if tag != "*" and (code := _supported(tag)):
            return code
    return settings.LANGUAGE_CODE

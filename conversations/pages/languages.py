"""The language menu of the top bar, and the signed-in person's choice applied to every page."""

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect
from django.utils import translation
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from conversations.services import languages


class UserLanguageMiddleware:
    """After AuthenticationMiddleware: a signed-in person's saved language wins over the cookie
    and the browser's Accept-Language that LocaleMiddleware went by."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        language = languages.saved_language(request.user)
        if language:
            translation.activate(language)
            request.LANGUAGE_CODE = language
        response = self.get_response(request)
        if language and request.COOKIES.get(settings.LANGUAGE_COOKIE_NAME) != language:
            # The socket reads the cookie, not the database: keep it equal to the choice.
            remember(response, language)
        return response


def remember(response: HttpResponse, language: str) -> None:
    response.set_cookie(
        settings.LANGUAGE_COOKIE_NAME,
        language,
        max_age=settings.LANGUAGE_COOKIE_AGE,
        samesite=settings.LANGUAGE_COOKIE_SAMESITE,
        secure=settings.LANGUAGE_COOKIE_SECURE,
        httponly=settings.LANGUAGE_COOKIE_HTTPONLY,
    )


@require_POST
def language_view(request: HttpRequest) -> HttpResponse:
    """Sets the page's language: in the cookie for anyone, and in a signed-in user's preferences
    ("" goes back to the browser's language)."""
    language = request.POST.get("language", "")
    if language and language not in languages.CODES:
        return HttpResponseBadRequest(_("Choose one of the languages offered."))
    if request.user.is_authenticated:
        languages.language_set(user=request.user, language=language)
    back = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(
        back, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        back = "conversation-list"
    response = redirect(back)
    if language:
        remember(response, language)
    else:
        response.delete_cookie(settings.LANGUAGE_COOKIE_NAME)
    return response

"""The request a page view gets: signed in, with django-htmx's view of it (`request.htmx`)."""

from django_htmx.middleware import HtmxDetails

from conversations.types import AuthenticatedHttpRequest


class HtmxRequest(AuthenticatedHttpRequest):
    """A @login_required view's request; HtmxMiddleware sets `htmx`, true when htmx sent it."""

    htmx: HtmxDetails

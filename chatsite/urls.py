from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView
from django.views.i18n import JavaScriptCatalog

from conversations.pages.password_reset import password_reset

urlpatterns = [
    path("admin/", admin.site.urls),
    # Browsers ask for /favicon.ico whatever the page links to (a PDF viewer, a bookmark...).
    path("favicon.ico", RedirectView.as_view(url=static("chatsite/favicon.svg"))),
    # The scripts' strings in the page's language: gettext() and friends for static/chatsite/*.js.
    path("jsi18n/", JavaScriptCatalog.as_view(), name="javascript-catalog"),
    # Before Django's own: offered only with an email server (conversations.pages.password_reset).
    path("accounts/password_reset/", password_reset, name="password_reset"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/", include("conversations.api.urls")),
    path("v1/", include("conversations.gateway.urls")),  # the OpenAI-compatible gateway
    path("", include("conversations.ops.metrics_views")),
    path("", include("conversations.ops.health")),
    path("oidc/", include("mozilla_django_oidc.urls")),  # single sign-on (conversations.pages.oidc)
    path("", include("conversations.urls")),
]

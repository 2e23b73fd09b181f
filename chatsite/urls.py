from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/", include("conversations.api.urls")),
    path("v1/", include("conversations.gateway.urls")),  # the OpenAI-compatible gateway
    path("", include("conversations.ops.metrics_views")),
    path("", include("conversations.ops.health")),
    path("oidc/", include("mozilla_django_oidc.urls")),  # single sign-on (conversations.pages.oidc)
    path("", include("conversations.urls")),
]

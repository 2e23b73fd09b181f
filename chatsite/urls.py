from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/", include("conversations.api.urls")),
    path("v1/", include("conversations.gateway.urls")),  # the OpenAI-compatible gateway
    path("", include("conversations.ops.metrics_views")),
    path("", include("conversations.ops.health")),
    path("", include("conversations.urls")),
]

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/", include("conversations.api.urls")),
    path("", include("conversations.metrics_views")),
    path("", include("conversations.health")),
    path("", include("conversations.urls")),
]

from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from conversations.api import (
    catalogue,
    conversations,
    downloads,
    feedback,
    imports,
    prompts,
    shares,
)
from conversations.api.permissions import DocsAccess

urlpatterns = [
    path("conversations/", conversations.ConversationList.as_view(), name="api-conversation-list"),
    path(
        "conversations/<uuid:conversation_id>/",
        conversations.ConversationDetail.as_view(),
        name="api-conversation-detail",
    ),
    path(
        "conversations/<uuid:conversation_id>/export",
        downloads.ConversationExport.as_view(),
        name="api-conversation-export",
    ),
    path(
        "conversations/<uuid:conversation_id>/shares/",
        shares.ConversationShares.as_view(),
        name="api-conversation-shares",
    ),
    path(
        "conversations/<uuid:conversation_id>/shares/<int:share_id>/",
        shares.ConversationShareDetail.as_view(),
        name="api-conversation-share-detail",
    ),
    path("models/", catalogue.ModelList.as_view(), name="api-model-list"),
    path("prompts/", prompts.PromptList.as_view(), name="api-prompt-list"),
    path("prompts/<int:prompt_id>/", prompts.PromptDetail.as_view(), name="api-prompt-detail"),
    path("export.jsonl", downloads.JsonlExport.as_view(), name="api-export-jsonl"),
    path("feedback.jsonl", feedback.FeedbackExport.as_view(), name="api-feedback-jsonl"),
    path("imports/", imports.ImportCreate.as_view(), name="api-import"),
    path("schema/", SpectacularAPIView.as_view(permission_classes=[DocsAccess]), name="api-schema"),
    path(
        "docs/",
        # The split view loads its start-up script from a URL: no inline script for the CSP.
        SpectacularSwaggerSplitView.as_view(url_name="api-schema", permission_classes=[DocsAccess]),
        name="api-docs",
    ),
]

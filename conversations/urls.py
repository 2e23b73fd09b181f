from django.urls import path

from conversations import import_pages, search_views, share_pages, views
from conversations.api import pages

urlpatterns = [
    path("", views.conversation_list, name="conversation-list"),
    path("conversations/new/", views.conversation_new, name="conversation-new"),
    path("conversations/sidebar/", views.conversation_sidebar_page, name="conversation-sidebar"),
    path("conversations/search/", search_views.conversation_search, name="conversation-search"),
    path(
        "conversations/search/messages/<int:message_id>/",
        search_views.search_show_message,
        name="search-show-message",
    ),
    path(
        "conversations/<uuid:conversation_id>/",
        views.conversation_detail,
        name="conversation-detail",
    ),
    path(
        "conversations/<uuid:conversation_id>/rename/",
        views.conversation_rename_view,
        name="conversation-rename",
    ),
    path(
        "conversations/<uuid:conversation_id>/settings/",
        views.conversation_settings_view,
        name="conversation-settings",
    ),
    path(
        "conversations/<uuid:conversation_id>/delete/",
        views.conversation_delete_view,
        name="conversation-delete",
    ),
    path(
        "conversations/<uuid:conversation_id>/shares/",
        share_pages.conversation_shares,
        name="conversation-shares",
    ),
    path(
        "conversations/<uuid:conversation_id>/shares/<int:share_id>/revoke/",
        share_pages.share_revoke_view,
        name="conversation-share-revoke",
    ),
    path("s/<str:token>/", share_pages.share_view, name="share-view"),
    path("settings/theme/", views.theme_view, name="theme"),
    path("settings/tokens/", pages.api_tokens, name="api-tokens"),
    path("settings/import/", import_pages.import_view, name="import"),
    path(
        "settings/tokens/<int:token_id>/revoke/",
        pages.api_token_revoke_view,
        name="api-token-revoke",
    ),
]

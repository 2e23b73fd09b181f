from django.urls import path

from conversations.pages import (
    account,
    attachments,
    chat,
    feedback,
    imports,
    join,
    languages,
    organise,
    projects,
    prompts,
    search,
    shares,
    tokens,
    usage,
)

urlpatterns = [
    path("", chat.conversation_list, name="conversation-list"),
    path("conversations/new/", chat.conversation_new, name="conversation-new"),
    path("conversations/sidebar/", chat.conversation_sidebar_page, name="conversation-sidebar"),
    path("conversations/search/", search.conversation_search, name="conversation-search"),
    path("archive/", organise.archive, name="archive"),
    path(
        "conversations/organise/", organise.conversation_row_action, name="conversation-row-action"
    ),
    path("projects/new/", projects.project_new, name="project-new"),
    path("projects/<int:project_id>/", projects.project_detail, name="project-detail"),
    path("projects/<int:project_id>/edit/", projects.project_change_view, name="project-change"),
    path("projects/<int:project_id>/delete/", projects.project_delete_view, name="project-delete"),
    path(
        "projects/<int:project_id>/conversations/<uuid:conversation_id>/",
        projects.project_conversation_read,
        name="project-conversation-read",
    ),
    path(
        "projects/<int:project_id>/conversations/new/",
        projects.project_conversation_new,
        name="project-conversation-new",
    ),
    path(
        "conversations/<uuid:conversation_id>/pin/",
        organise.conversation_pin_view,
        name="conversation-pin",
    ),
    path(
        "conversations/<uuid:conversation_id>/archive/",
        organise.conversation_archive_view,
        name="conversation-archive",
    ),
    path(
        "conversations/<uuid:conversation_id>/move/",
        organise.conversation_move_view,
        name="conversation-move",
    ),
    path(
        "conversations/search/messages/<int:message_id>/",
        search.search_show_message,
        name="search-show-message",
    ),
    path(
        "conversations/<uuid:conversation_id>/",
        chat.conversation_detail,
        name="conversation-detail",
    ),
    path(
        "conversations/<uuid:conversation_id>/messages/<int:message_id>/",
        chat.conversation_message,
        name="conversation-message",
    ),
    path(
        "replies/<int:message_id>/feedback/",
        feedback.message_feedback,
        name="message-feedback",
    ),
    path(
        "conversations/<uuid:conversation_id>/rename/",
        chat.conversation_rename_view,
        name="conversation-rename",
    ),
    path(
        "conversations/<uuid:conversation_id>/settings/",
        chat.conversation_settings_view,
        name="conversation-settings",
    ),
    path(
        "conversations/<uuid:conversation_id>/model/",
        chat.conversation_model_view,
        name="conversation-model",
    ),
    path(
        "conversations/<uuid:conversation_id>/delete/",
        chat.conversation_delete_view,
        name="conversation-delete",
    ),
    path(
        "conversations/<uuid:conversation_id>/shares/",
        shares.conversation_shares,
        name="conversation-shares",
    ),
    path(
        "conversations/<uuid:conversation_id>/shares/<int:share_id>/revoke/",
        shares.share_revoke_view,
        name="conversation-share-revoke",
    ),
    path(
        "conversations/<uuid:conversation_id>/attachments/",
        attachments.attachment_upload,
        name="attachment-upload",
    ),
    path(
        "attachments/<uuid:attachment_id>/",
        attachments.attachment_download,
        name="attachment-download",
    ),
    path(
        "attachments/<uuid:attachment_id>/remove/",
        attachments.attachment_remove,
        name="attachment-remove",
    ),
    path("s/<str:token>/", shares.share_view, name="share-view"),
    path("account/", account.account, name="account"),
    path("account/defaults/", account.account_defaults_view, name="account-defaults"),
    path("usage/", usage.usage, name="usage"),
    path("join/<str:token>/", join.join, name="join"),
    path("signup/", join.signup, name="signup"),
    path(
        "account/sign-out-everywhere/",
        account.sign_out_everywhere_view,
        name="sign-out-everywhere",
    ),
    path("settings/theme/", chat.theme_view, name="theme"),
    path("settings/language/", languages.language_view, name="language"),
    path("settings/tokens/", tokens.api_tokens, name="api-tokens"),
    path("settings/import/", imports.import_view, name="import"),
    path("settings/prompts/", prompts.prompt_library, name="prompt-library"),
    path("settings/prompts/choices/", prompts.prompt_choices, name="prompt-choices"),
    path("settings/prompts/<int:prompt_id>/", prompts.prompt_edit, name="prompt-edit"),
    path(
        "settings/prompts/<int:prompt_id>/delete/",
        prompts.prompt_delete_view,
        name="prompt-delete",
    ),
    path(
        "settings/tokens/<int:token_id>/revoke/",
        tokens.api_token_revoke_view,
        name="api-token-revoke",
    ),
]

from django.urls import path

from chat.web import account_views, conversation_views, document_views, key_views, user_views, views

app_name = "chat"

urlpatterns = [
    path("", views.index, name="index"),
    path("c/new/", views.new_conversation, name="new"),
    path("c/<uuid:conversation_id>/", views.conversation_page, name="conversation"),
    path("c/<uuid:conversation_id>/rename/", views.rename_conversation, name="rename"),
    path("c/<uuid:conversation_id>/delete/", views.delete_conversation, name="delete"),
    path("c/<uuid:conversation_id>/settings/", views.conversation_settings, name="settings"),
    path("c/<uuid:conversation_id>/tools/", conversation_views.tool_settings, name="tool-settings"),
    path("c/<uuid:conversation_id>/prompt/", conversation_views.prompt_settings, name="prompt-settings"),
    path("c/<uuid:conversation_id>/m/<int:message_id>/edit/", conversation_views.edit_question, name="edit-question"),
    path(
        "c/<uuid:conversation_id>/export.md", conversation_views.export_conversation, {"file_format": "md"}, "export-md"
    ),
    path(
        "c/<uuid:conversation_id>/export.json",
        conversation_views.export_conversation,
        {"file_format": "json"},
        "export-json",
    ),
    path("c/delete-many/", conversation_views.delete_many, name="delete-many"),
    path("search/", conversation_views.search_page, name="search"),
    path("m/<int:message_id>/image/", views.message_image, name="message-image"),
    path("keys/", key_views.api_keys, name="api-keys"),
    path("keys/new/", key_views.create_api_key, name="api-key-create"),
    path("keys/<int:key_id>/revoke/", key_views.revoke_api_key, name="api-key-revoke"),
    path("signup/", account_views.sign_up, name="signup"),
    path("signup/invite/<str:invite_token>/", account_views.sign_up, name="signup-invite"),
    path("password/", account_views.AccountPasswordChangeView.as_view(), name="password-change"),
    path("staff/users/", user_views.users, name="users"),
    path("staff/users/signup-mode/", user_views.set_signup_mode, name="signup-mode"),
    path("staff/users/invites/new/", user_views.create_invite, name="invite-create"),
    path("staff/users/invites/<int:invite_id>/revoke/", user_views.revoke_invite, name="invite-revoke"),
    path("staff/users/<int:user_id>/approve/", user_views.approve, name="user-approve"),
    path("staff/users/<int:user_id>/reject/", user_views.reject, name="user-reject"),
    path("staff/users/<int:user_id>/enabled/", user_views.set_enabled, name="user-enabled"),
    path("staff/users/<int:user_id>/quotas/", user_views.set_quotas, name="user-quotas"),
    path("staff/users/<int:user_id>/password/", user_views.reset_password, name="user-password"),
    path("staff/groups/new/", user_views.create_group, name="group-create"),
    path("staff/groups/<int:group_id>/", user_views.update_group, name="group-update"),
    path("staff/groups/<int:group_id>/delete/", user_views.delete_group, name="group-delete"),
    path("connect/", key_views.connect_agent, name="connect"),
    path("documents/upload/", document_views.upload_document, name="document-upload"),
    path("documents/<uuid:document_id>/", document_views.document_status, name="document"),
    path("documents/<uuid:document_id>/cancel/", document_views.cancel_document, name="document-cancel"),
    path("documents/<uuid:document_id>/delete/", document_views.delete_document, name="document-delete"),
    path("documents/<uuid:document_id>/summarize/", document_views.summarize_document, name="document-summarize"),
]

from django.contrib import admin

from chat.models import ApiKey, Conversation, Message


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin):
    list_display = ("title", "owner", "updated_at")
    search_fields = ("title", "owner__username")


@admin.register(Message)
class MessageAdmin(admin.ModelAdmin):
    list_display = ("conversation", "role", "status", "created_at")
    list_filter = ("role", "status")
    exclude = ("image",)


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    """Staff see every key's usage and set how many requests it may have at once."""

    list_display = (
        "name", "owner", "prefix", "requests", "prompt_tokens", "completion_tokens", "last_used_at",
        "concurrency_limit", "revoked_at",
    )  # fmt: skip
    list_editable = ("concurrency_limit",)
    list_filter = ("revoked_at",)
    search_fields = ("name", "owner__username", "prefix")
    fields = ("owner", "name", "prefix", "concurrency_limit", "requests", "prompt_tokens", "completion_tokens",
              "created_at", "last_used_at", "revoked_at")  # fmt: skip
    readonly_fields = tuple(field for field in fields if field != "concurrency_limit")

    def has_add_permission(self, request) -> bool:
        return False  # keys are made by their owners, who alone see them once

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


class Conversation(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="conversations")
    title = models.CharField(max_length=200, blank=True)
    # The server profile that answers; null: the default profile.
    profile = models.ForeignKey(
        "monitor.ServerProfile", null=True, blank=True, on_delete=models.SET_NULL, related_name="conversations"
    )
    thinking_enabled = models.BooleanField(default=True)
    # Tokens the model may think before it must answer; null: no limit.
    thinking_budget = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at"]
        indexes = [models.Index(fields=["owner", "-updated_at"])]

    def __str__(self) -> str:
        return self.title or str(self.id)

    @property
    def display_title(self) -> str:
        return self.title or str(_("New chat"))


class Message(models.Model):
    class Role(models.TextChoices):
        USER = "user", _("User")
        ASSISTANT = "assistant", _("Assistant")

    class Status(models.TextChoices):
        COMPLETE = "complete", _("Complete")
        STREAMING = "streaming", _("Streaming")
        STOPPED = "stopped", _("Stopped")
        INCOMPLETE = "incomplete", _("Incomplete")
        ERROR = "error", _("Error")

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="messages")
    role = models.CharField(max_length=16, choices=Role.choices)
    content = models.TextField(blank=True)
    reasoning = models.TextField(blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.COMPLETE)
    error = models.TextField(blank=True)
    # Figures from llama-server's `timings` and our own clock.
    stats = models.JSONField(default=dict, blank=True)
    # A JPEG or PNG already scaled to CHAT_IMAGE_MAX_EDGE; small enough to keep in the row.
    image = models.BinaryField(null=True, blank=True)
    image_type = models.CharField(max_length=32, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.role}: {self.content[:40]}"


def default_key_concurrency() -> int:
    return settings.API_KEY_CONCURRENCY


class ApiKey(models.Model):
    """A person's key for the OpenAI-compatible API. Only the key's SHA-256 is kept."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(_("name"), max_length=100)
    # The key's visible id (after "qw-"): finds the row; the rest of the key is checked against key_hash.
    prefix = models.CharField(_("key id"), max_length=16, unique=True)
    key_hash = models.CharField(max_length=64)
    concurrency_limit = models.PositiveSmallIntegerField(
        _("concurrent requests"), default=default_key_concurrency, help_text=_("queued and running requests at once")
    )
    requests = models.PositiveBigIntegerField(_("requests"), default=0)
    prompt_tokens = models.PositiveBigIntegerField(_("prompt tokens"), default=0)
    completion_tokens = models.PositiveBigIntegerField(_("output tokens"), default=0)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    last_used_at = models.DateTimeField(_("last used"), null=True, blank=True)
    revoked_at = models.DateTimeField(_("revoked"), null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = _("API key")
        verbose_name_plural = _("API keys")

    def __str__(self) -> str:
        return f"{self.name} (qw-{self.prefix}…)"

    @property
    def display_id(self) -> str:
        return f"qw-{self.prefix}…"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

"""The ledger's rows and their daily rollup (app ``chat``; imported by ``chat.models``).

The pages read the rollups, never the raw rows: ``UsageDayTotal`` (a row per day and value of each
dimension) for a view narrowed by nothing but its days, ``UsageDay`` (a row per day and combination of
every dimension) for the others. Each recorded row adds itself to both in the same transaction, so they
always agree.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


class UsageKind(models.TextChoices):
    CHAT = "chat", _("Chat answer")
    API_CHAT = "api-chat", _("API chat completion")
    API_COMPLETION = "api-completion", _("API completion")
    API_EMBEDDING = "api-embedding", _("API embeddings")
    API_RERANK = "api-rerank", _("API rerank")
    DOCUMENT = "document", _("Document job")
    KNOWLEDGE = "knowledge", _("Knowledge base (embeddings, reranking)")


class UsageOutcome(models.TextChoices):
    OK = "ok", _("ok")
    ERROR = "error", _("error")
    STOPPED = "stopped", _("stopped")
    INCOMPLETE = "incomplete", _("incomplete")


class UsageRecord(models.Model):
    """One chat answer, API request or document job's model call."""

    at = models.DateTimeField()
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="usage_records")
    api_key = models.ForeignKey("chat.ApiKey", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # The person's primary group when the row was recorded (the first of their groups by name).
    group = models.ForeignKey("auth.Group", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    kind = models.CharField(max_length=16, choices=UsageKind.choices)
    profile = models.CharField(max_length=100, blank=True)
    node = models.CharField(max_length=100, blank=True)
    # The whole prompt (cached or not), of which ``cached_tokens`` came from the cache; the output.
    prompt_tokens = models.PositiveIntegerField(default=0)
    cached_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    queue_ms = models.PositiveIntegerField(default=0)
    duration_ms = models.PositiveIntegerField(default=0)
    outcome = models.CharField(max_length=16, choices=UsageOutcome.choices)

    class Meta:
        indexes = [models.Index(fields=["at"]), models.Index(fields=["user", "at"])]


class UsageDay(models.Model):
    """The ledger summed per server-time day and every dimension the page shows. ``group_id`` and
    ``api_key_id`` are plain numbers, 0 for none (a unique key with a NULL in it never conflicts)."""

    day = models.DateField()
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    group_id = models.PositiveIntegerField(default=0)
    api_key_id = models.PositiveIntegerField(default=0)
    kind = models.CharField(max_length=16, choices=UsageKind.choices)
    profile = models.CharField(max_length=100, blank=True)
    node = models.CharField(max_length=100, blank=True)
    requests = models.PositiveIntegerField(default=0)
    errors = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveBigIntegerField(default=0)
    cached_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    queue_ms = models.PositiveBigIntegerField(default=0)
    duration_ms = models.PositiveBigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["day", "user", "group_id", "api_key_id", "kind", "profile", "node"], name="usage_day_unique"
            )
        ]
        indexes = [models.Index(fields=["user", "day"])]


class UsageDayTotal(models.Model):
    """The ledger summed per day and per value of each one dimension (``person``: a user id, ``group``: a
    group id or 0, ``key``: a key id or 0, ``model``: a profile, ``node``, ``kind``): what a view narrowed
    to nothing but its days reads (days × values rows, however many combinations ``UsageDay`` holds)."""

    day = models.DateField()
    dimension = models.CharField(max_length=8)
    value = models.CharField(max_length=100, blank=True)
    requests = models.PositiveIntegerField(default=0)
    errors = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveBigIntegerField(default=0)
    cached_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    queue_ms = models.PositiveBigIntegerField(default=0)
    duration_ms = models.PositiveBigIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["dimension", "day", "value"], name="usage_day_total_unique")]
        indexes = [models.Index(fields=["day"])]

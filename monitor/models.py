from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


class DownloadJob(models.Model):
    """One model download: a single GGUF file or a whole multi-part set."""

    class Status(models.TextChoices):
        QUEUED = "queued", _("Queued")
        RUNNING = "running", _("Downloading")
        VERIFYING = "verifying", _("Verifying")
        DONE = "done", _("Done")
        FAILED = "failed", _("Failed")
        CANCELLING = "cancelling", _("Cancelling")
        CANCELLED = "cancelled", _("Cancelled")

    ACTIVE = (Status.QUEUED, Status.RUNNING, Status.VERIFYING, Status.CANCELLING)

    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    url = models.URLField(max_length=2000)
    # Per part: {"url", "name", "sha256" (expected or ""), "size"}.
    parts = models.JSONField(default=list)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    error = models.TextField(blank=True)
    bytes_done = models.BigIntegerField(default=0)
    bytes_total = models.BigIntegerField(null=True, blank=True)
    rate_bps = models.FloatField(default=0)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.file_name

    @property
    def file_name(self) -> str:
        return self.parts[0]["name"] if self.parts else self.url

    @property
    def eta_seconds(self) -> float | None:
        if not self.bytes_total or not self.rate_bps:
            return None
        return max(self.bytes_total - self.bytes_done, 0) / self.rate_bps

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from chat import document_kinds as kinds


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
    # Sent first in every turn's context (chat/conversations/context.py); "" none.
    system_prompt = models.TextField(blank=True)
    # A name from chat/conversations/presets.py (sampling settings); "" the profile's own.
    sampling_preset = models.CharField(max_length=16, blank=True)
    collections = models.ManyToManyField("Collection", blank=True, related_name="conversations")
    # The person let the model call tools in this conversation (chat/tools/loop.py), where its profile can.
    tools_enabled = models.BooleanField(default=False)
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
    # An answer's tool calls in order (chat/tools/loop.py): tool, arguments, state, result; null: none.
    # Nullable so SQLite adds the column in place: remaking chat_message would drop its search triggers.
    tool_steps = models.JSONField(null=True, blank=True)
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
        return f"{self.name} ({self.display_id})"

    @property
    def display_id(self) -> str:
        return f"qw-{self.prefix}…"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class Document(models.Model):
    """An uploaded PDF, DOCX, HTML, TXT or Markdown file: its pages (a DOCX's or HTML's sections)
    are rows, its summary is built from chunks."""

    class Kind(models.TextChoices):
        PDF = kinds.PDF, "PDF"
        TEXT = kinds.TEXT, _("Text")
        MARKDOWN = kinds.MARKDOWN, "Markdown"
        DOCX = kinds.DOCX, "Word (DOCX)"
        HTML = kinds.HTML, "HTML"

    class Status(models.TextChoices):
        QUEUED = "queued", _("Queued")
        EXTRACTING = "extracting", _("Reading the pages")
        SUMMARIZING = "summarizing", _("Summarizing")
        READY = "ready", _("Ready")
        FAILED = "failed", _("Failed")
        CANCELLED = "cancelled", _("Cancelled")

    ACTIVE = (Status.QUEUED, Status.EXTRACTING, Status.SUMMARIZING)
    SECTIONED = (Kind.DOCX, Kind.HTML)  # "pages" are sections cut at headings, cited as § N

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="documents")
    # The conversation it is attached to: its questions use the summary and passages.
    conversation = models.ForeignKey(
        Conversation, null=True, blank=True, on_delete=models.SET_NULL, related_name="documents"
    )
    name = models.CharField(max_length=255)
    kind = models.CharField(max_length=8, choices=Kind.choices)
    size_bytes = models.PositiveBigIntegerField(default=0)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    error = models.TextField(blank=True)
    page_count = models.PositiveIntegerField(default=0)
    pages_done = models.PositiveIntegerField(default=0)
    # Pages with no text layer (scanned images), 1-based.
    scanned_pages = models.JSONField(default=list, blank=True)
    # Those of them whose text was read by text recognition (OCR), 1-based.
    ocr_pages = models.JSONField(default=list, blank=True)
    # Those read by the model itself (its vision projector), where the profile's admin chose so.
    model_read_pages = models.JSONField(default=list, blank=True)
    # Why the model did not read the scanned pages it was chosen for (Tesseract did), for the card.
    scan_note = models.TextField(blank=True)
    # Summary language chosen by the user ("" = the document's own language).
    summary_language = models.CharField(max_length=16, blank=True)
    summary = models.TextField(blank=True)
    cancel_requested = models.BooleanField(default=False)
    # Written by the worker while it works; a stale heartbeat means the worker died.
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # Runs that took it (each claim); a document that stalls DOCUMENT_MAX_ATTEMPTS times is failed.
    attempts = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["status", "heartbeat_at"])]

    def __str__(self) -> str:
        return self.name


class DocumentPage(models.Model):
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="pages")
    number = models.PositiveIntegerField()  # 1-based, as people cite pages
    text = models.TextField(blank=True)

    class Meta:
        ordering = ["number"]
        constraints = [models.UniqueConstraint(fields=["document", "number"], name="document_page_unique")]


class DocumentChunk(models.Model):
    """One piece of the map-reduce: level 0 summarizes pages, level N combines level N-1 summaries.

    Saved as soon as its summary is written, so a killed worker resumes from here."""

    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="chunks")
    level = models.PositiveSmallIntegerField()
    index = models.PositiveIntegerField()
    first_page = models.PositiveIntegerField()
    last_page = models.PositiveIntegerField()
    text = models.TextField()  # the input, with its page markers
    tokens = models.PositiveIntegerField(default=0)
    summary = models.TextField(blank=True)
    # Set when the part's output was still mostly a copy of its prompt or source when asked again.
    note = models.CharField(max_length=20, blank=True)
    done = models.BooleanField(default=False)
    requests = models.PositiveSmallIntegerField(default=0)  # model calls spent on it
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["level", "index"]
        constraints = [models.UniqueConstraint(fields=["document", "level", "index"], name="document_chunk_unique")]

    @property
    def pages_label(self) -> str:
        """``p. 3``, ``pp. 3–9`` (``§ 3``, ``§§ 3–9`` for a DOCX's or HTML's sections), ``(OCR)`` after
        it when any of these pages was read by text recognition, ``(read by the model)`` when by the model."""
        document = self.document
        one, many = ("§", "§§") if document.kind in Document.SECTIONED else ("p.", "pp.")
        if self.first_page == self.last_page:
            label = f"{one} {self.first_page}"
        else:
            label = f"{many} {self.first_page}–{self.last_page}"
        if any(self.first_page <= number <= self.last_page for number in document.ocr_pages):
            label += " (OCR)"
        if any(self.first_page <= number <= self.last_page for number in document.model_read_pages):
            label += " " + _("(read by the model)")
        return label


class SignupSettings(models.Model):
    """How people may get an account on their own: one row (pk 1), set by staff on the users page."""

    class Mode(models.TextChoices):
        OFF = "off", _("Off: only staff and invite links create accounts")
        APPROVAL = "approval", _("With approval: staff approve each new account")
        OPEN = "open", _("Open: anyone on the network may sign up")

    mode = models.CharField(_("sign-up"), max_length=16, choices=Mode.choices, default=Mode.OFF)
    updated_at = models.DateTimeField(auto_now=True)


class Account(models.Model):
    """What the app keeps about a person beyond Django's user: approval, quotas, a forced password change.

    Created when first needed; a user without one is an approved account with the default quotas."""

    class Approval(models.TextChoices):
        PENDING = "pending", _("Waiting for approval")
        APPROVED = "approved", _("Approved")

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="account")
    approval = models.CharField(max_length=16, choices=Approval.choices, default=Approval.APPROVED)
    # Per-person quotas; null: the default from settings; 0: no limit.
    turns_per_day = models.PositiveIntegerField(_("turns per day"), null=True, blank=True)
    tokens_per_day = models.PositiveBigIntegerField(_("tokens per day"), null=True, blank=True)
    must_change_password = models.BooleanField(default=False)
    last_turn_at = models.DateTimeField(null=True, blank=True)
    # The person's entry in the LDAP directory (empty: a local account); the re-check reads it again.
    directory_dn = models.CharField(max_length=512, blank=True, default="")
    # The person's subject (``sub``) at the OIDC provider ``oidc_issuer`` (empty: not an OIDC account;
    # a subject is unique only at its issuer), and the refresh token the re-check asks the provider
    # with (sealed: chat.accounts.oidc_provider; never shown).
    oidc_issuer = models.CharField(max_length=255, blank=True, default="")
    oidc_subject = models.CharField(max_length=255, blank=True, default="", db_index=True)
    oidc_refresh_token = models.TextField(blank=True, default="")
    # Disabled by a re-check (gone or disabled in the LDAP directory or at the OIDC provider), not by
    # staff: enabled again by it.
    disabled_by_directory = models.BooleanField(default=False)

    def __str__(self) -> str:
        return str(self.user)


class Invite(models.Model):
    """A sign-up link a staff member made: used once, before it expires. Only the token's SHA-256 is kept."""

    token_hash = models.CharField(max_length=64, unique=True)
    note = models.CharField(_("note"), max_length=100, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="invites_made"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    used_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="invite_used"
    )

    class Meta:
        ordering = ["-created_at"]


class DailyUsage(models.Model):
    """A person's turns (chat answers and API requests) and tokens on one day (server time)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="daily_usage")
    day = models.DateField()
    turns = models.PositiveIntegerField(default=0)
    tokens = models.PositiveBigIntegerField(default=0)

    class Meta:
        ordering = ["-day"]
        constraints = [models.UniqueConstraint(fields=["user", "day"], name="daily_usage_unique")]


class GroupPolicy(models.Model):
    """What a group (Django's own ``auth.Group``, its members the group's users) may do: daily quotas
    and the chat profiles its people may use. A profile tied to no group is open to everyone; one tied
    to groups only to their members (and staff). Created with the group on the users page."""

    group = models.OneToOneField("auth.Group", on_delete=models.CASCADE, related_name="policy")
    # Null: the group sets no figure; 0: no limit. A person's own figure overrides; of several groups, the most generous.
    turns_per_day = models.PositiveIntegerField(_("turns per day"), null=True, blank=True)
    tokens_per_day = models.PositiveBigIntegerField(_("tokens per day"), null=True, blank=True)
    profiles = models.ManyToManyField("monitor.ServerProfile", blank=True, related_name="group_policies")

    def __str__(self) -> str:
        return str(self.group)


# The usage ledger's rows live in their own sub-package (this file is at its size limit); imported here,
# Django finds them as the app's. Knowledge bases' rows: chat/knowledge/models.py (imported by the app's
# ready(): that package reads this module's rows).
from chat.usage.models import UsageDay, UsageDayTotal, UsageRecord  # noqa: E402, F401

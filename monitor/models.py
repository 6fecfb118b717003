"""The inference box's data: downloads, server profiles, the timeline, dashboard history, self-tests."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


class DownloadJob(models.Model):
    """One model download to one node: a single GGUF file or a whole multi-part set.

    A download to several nodes is one job per node: each node's worker fetches, verifies and moves the
    file into its own models folder and writes only its own row (progress, cancel and resume per node)."""

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
    # The node whose worker downloads it into its own models folder (None: the main box's own, as every
    # download was before nodes); a removed node's downloads go with it.
    node = models.ForeignKey("Node", null=True, blank=True, on_delete=models.CASCADE, related_name="downloads")
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


class ServerProfile(models.Model):
    """llama-server launch settings for one model file, kept by name and edited by admins."""

    class Switch(models.TextChoices):
        AUTO = "auto", _("auto")
        ON = "on", _("on")
        OFF = "off", _("off")

    class Kind(models.TextChoices):
        """What the profile serves: chat (generation), embeddings (``--embeddings``) or reranking (``--reranking``)."""

        CHAT = "chat", _("chat")
        EMBEDDING = "embedding", _("embeddings")
        RERANK = "rerank", _("reranking")

    class Pooling(models.TextChoices):
        """llama-server's ``--pooling`` choices: how an embedding profile makes one vector of a text's tokens."""

        MEAN = "mean", _("mean of the tokens")
        CLS = "cls", _("first token (CLS)")
        LAST = "last", _("last token")
        NONE = "none", _("none (a vector per token)")
        RANK = "rank", _("rank (rerankers)")

    class ScanReader(models.TextChoices):
        """Who reads a document's scanned pages (pages with no text layer) for this profile."""

        TESSERACT = "tesseract", _("Tesseract text recognition (OCR)")
        MODEL = "model", _("the model itself (needs a vision projector)")

    name = models.CharField(_("name"), max_length=64, unique=True)
    description = models.CharField(_("description"), max_length=200, blank=True)
    available_to_users = models.BooleanField(_("available to users"), default=True)
    is_default = models.BooleanField(_("default profile"), default=False)
    kind = models.CharField(
        _("kind"),
        max_length=16,
        choices=Kind.choices,
        default=Kind.CHAT,
        help_text=_("Embeddings and reranking profiles serve /v1/embeddings and /v1/rerank, not chat."),
    )
    pooling = models.CharField(
        _("pooling"),
        max_length=8,
        choices=Pooling.choices,
        default=Pooling.MEAN,
        help_text=_("How an embeddings profile pools a text's tokens into one vector (llama-server --pooling)."),
    )
    model_file = models.CharField(_("model file"), max_length=255, blank=True)
    # A remote profile talks to an existing llama-server elsewhere instead of a local model file.
    remote_url = models.URLField(_("remote llama-server URL"), blank=True, help_text=_("leave empty for a local model"))
    remote_api_key = models.CharField(_("remote API key"), max_length=200, blank=True)
    remote_model = models.CharField(
        _("remote model name"), max_length=200, blank=True, help_text=_("for a remote router; empty: its only model")
    )
    load_on_startup = models.BooleanField(_("load when llama-server starts"), default=False)
    # Every change of the launch options is a new revision, served by a node's router as
    # "<name>@<revision>". Each node that serves the profile (its Placement) has its own live
    # revision: the last one that loaded there, which keeps serving while a newer one loads
    # and stays when the newer one fails there.
    revision = models.PositiveIntegerField(default=1, editable=False)
    revision_options = models.JSONField(default=list, editable=False)
    ctx_size = models.PositiveIntegerField(_("context size"), default=8192)
    gpu_layers = models.CharField(_("GPU layers"), max_length=8, default="auto", help_text=_("a number, auto or all"))
    n_cpu_moe = models.PositiveIntegerField(_("MoE layers on CPU"), default=0)
    batch_size = models.PositiveIntegerField(_("batch size"), default=2048)
    ubatch_size = models.PositiveIntegerField(_("micro-batch size"), default=512)
    threads = models.IntegerField(_("threads"), default=-1, help_text=_("-1: llama-server decides"))
    cache_type_k = models.CharField(_("K cache type"), max_length=8, default="f16")
    cache_type_v = models.CharField(_("V cache type"), max_length=8, default="f16")
    flash_attn = models.CharField(_("flash attention"), max_length=4, choices=Switch.choices, default=Switch.AUTO)
    parallel = models.PositiveIntegerField(_("parallel slots"), default=2)
    draft_model_file = models.CharField(_("draft model file"), max_length=255, blank=True)
    draft_max = models.PositiveIntegerField(_("draft tokens (max)"), default=16)
    draft_min = models.PositiveIntegerField(_("draft tokens (min)"), default=0)
    mmproj_file = models.CharField(_("vision projector file"), max_length=255, blank=True)
    scan_reader = models.CharField(
        _("scanned pages are read by"),
        max_length=16,
        choices=ScanReader.choices,
        default=ScanReader.TESSERACT,
        help_text=_("The model itself can read them only where the profile has a vision projector."),
    )
    # A model instance that sends nothing for this long while it holds requests, and does not answer a
    # check either, is frozen: the people waiting are told, and its node restarts it.
    hang_limit_s = models.PositiveIntegerField(
        _("hang limit (s)"),
        default=20,
        help_text=_(
            "An answer that gets nothing for this long, from a server that does not answer a check, is stopped and the server restarted."
        ),
    )
    reasoning = models.CharField(_("reasoning"), max_length=4, choices=Switch.choices, default=Switch.AUTO)
    reasoning_budget = models.IntegerField(_("reasoning budget"), default=-1, help_text=_("-1: no limit"))
    chat_template = models.CharField(
        _("built-in chat template"), max_length=32, blank=True, help_text=_("a name llama-server knows, e.g. chatml")
    )
    chat_template_jinja = models.TextField(_("custom chat template (Jinja)"), blank=True)
    temperature = models.FloatField(_("temperature"), default=0.8)
    top_p = models.FloatField(_("top-p"), default=0.95)
    top_k = models.PositiveIntegerField(_("top-k"), default=40)
    min_p = models.FloatField(_("min-p"), default=0.05)
    repeat_penalty = models.FloatField(_("repeat penalty"), default=1.0)
    extra_args = models.TextField(_("extra arguments"), blank=True, help_text=_("checked against llama-server --help"))
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def is_remote(self) -> bool:
        return bool(self.remote_url)

    @property
    def is_chat(self) -> bool:
        return self.kind == self.Kind.CHAT

    def save(self, *args, **kwargs) -> None:
        super().save(*args, **kwargs)
        if self.is_default:  # one default at a time
            ServerProfile.objects.exclude(pk=self.pk).filter(is_default=True).update(is_default=False)


class Node(models.Model):
    """An inference box on the LAN: its llama-server router serves the profiles placed on it.

    The main box is a node too (``is_local``, named after its host): a single-box install has one.
    The app reaches a node's router at ``url`` with ``api_key`` (generated when it joined; never
    shown to a browser); the node proves itself with its credential (only its hash is kept)."""

    name = models.SlugField(_("name"), max_length=48, unique=True)
    url = models.CharField(_("llama-server address"), max_length=200, blank=True)  # empty: this box's own
    api_key = models.CharField(max_length=200, blank=True, editable=False)
    credential_hash = models.CharField(max_length=64, blank=True, editable=False)
    redis_user = models.CharField(max_length=64, blank=True, editable=False)
    is_local = models.BooleanField(default=False, editable=False)
    # What the node registered: its GPUs and VRAM, RAM, CPU cores, llama-server build, models (with SHA256).
    facts = models.JSONField(default=dict, blank=True)
    joined_at = models.DateTimeField(auto_now_add=True)
    registered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-is_local", "name"]

    def __str__(self) -> str:
        return self.name

    @property
    def registered_models(self) -> dict[str, str]:
        """The model files it registered, name (relative to its models folder) -> SHA256."""
        found = self.facts.get("models") if isinstance(self.facts, dict) else None
        return {
            str(item["name"]): str(item.get("sha256") or "")
            for item in found or []
            if isinstance(item, dict) and item.get("name")
        }


class JoinToken(models.Model):
    """A one-time token that lets a box join as a node; shown once, only its SHA-256 kept."""

    token_hash = models.CharField(max_length=64, unique=True)
    note = models.CharField(_("note"), max_length=200, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    node = models.ForeignKey(Node, null=True, blank=True, on_delete=models.SET_NULL, related_name="join_tokens")
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]


class Placement(models.Model):
    """A profile served by a node, with its live revision there (safe changes go node by node)."""

    profile = models.ForeignKey(ServerProfile, on_delete=models.CASCADE, related_name="placements")
    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="placements")
    live_revision = models.PositiveIntegerField(null=True, editable=False)
    live_options = models.JSONField(default=list, editable=False)
    # Why the profile's current revision did not load on this node ("" when it did, or was not tried).
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["node__name"]
        constraints = [models.UniqueConstraint(fields=["profile", "node"], name="one_placement_per_node")]

    def __str__(self) -> str:
        return f"{self.profile.name} on {self.node.name}"


class Event(models.Model):
    """One line of the box's timeline: loads, failures, restarts, downloads, queue overflows."""

    class Kind(models.TextChoices):
        PROFILE_LOADED = "profile_loaded", _("Profile loaded")
        PROFILE_FAILED = "profile_failed", _("Profile failed to load")
        PROFILE_UNLOADED = "profile_unloaded", _("Profile unloaded")
        SERVER_STARTED = "server_started", _("llama-server started")
        SERVER_RESTARTED = "server_restarted", _("llama-server restarted")
        SERVER_DOWN = "server_down", _("llama-server down")
        DOWNLOAD_FINISHED = "download_finished", _("Download finished")
        DOWNLOAD_FAILED = "download_failed", _("Download failed")
        QUEUE_OVERFLOW = "queue_overflow", _("Queue overflow")
        SELF_TEST = "self_test", _("Self-test")
        PROCESS_EXITED = "process_exited", _("Process exited")
        PROCESS_RESTARTED = "process_restarted", _("Process restarted")
        PROCESS_FATAL = "process_fatal", _("Process gave up restarting")
        NODE_JOINED = "node_joined", _("Node joined")
        NODE_LEFT = "node_left", _("Node left")
        NODE_DOWN = "node_down", _("Node down")
        NODE_UP = "node_up", _("Node back")
        NODE_REFUSED = "node_refused", _("Node refused")

    class Level(models.TextChoices):
        INFO = "info", _("info")
        WARNING = "warning", _("warning")
        ERROR = "error", _("error")

    kind = models.CharField(max_length=32, choices=Kind.choices)
    level = models.CharField(max_length=8, choices=Level.choices, default=Level.INFO)
    profile = models.CharField(max_length=64, blank=True)
    node = models.CharField(max_length=48, blank=True)
    message = models.TextField()
    details = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.kind} {self.message}"


class MetricMinute(models.Model):
    """One minute of one node's dashboard figures (means of its samples), kept for the history charts."""

    at = models.DateTimeField(db_index=True)
    # The node whose sampler took the samples ("": rows from before there were nodes, the main box's).
    node = models.CharField(max_length=48, blank=True, db_index=True)
    # Flat series name -> mean value over the minute, e.g. {"host.cpu_pct": 12.5, "gpu0.used_bytes": ...}.
    values = models.JSONField(default=dict)

    class Meta:
        ordering = ["at"]


class SelfTestResult(models.Model):
    """What one self-test of a server profile measured."""

    profile = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    ok = models.BooleanField(default=False)
    error = models.TextField(blank=True)
    models_listed = models.JSONField(default=list, blank=True)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    prompt_tps = models.FloatField(null=True, blank=True)
    generated_tokens = models.PositiveIntegerField(null=True, blank=True)
    generation_tps = models.FloatField(null=True, blank=True)
    ttft_ms = models.FloatField(null=True, blank=True)
    # The profile's settings at the time (context, slots, GPU layers, cache types...), to compare runs.
    settings_summary = models.CharField(max_length=400, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.profile} {self.created_at:%Y-%m-%d %H:%M}"

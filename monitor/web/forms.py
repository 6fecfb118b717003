"""Forms at the border of the staff pages: downloads, the planner, server profiles."""

from __future__ import annotations

import dataclasses

from django import forms
from django.conf import settings
from django.core.exceptions import ValidationError
from django.urls import reverse
from django.utils.translation import gettext_lazy as _

from monitor.catalog.download_jobs import DownloadError, files_on
from monitor.catalog.planner import (
    CACHE_TYPE_BYTES,
    DEFAULT_CACHE_RAM_MIB,
    DEFAULT_CTX_CHECKPOINTS,
    GIB,
    PlanRequest,
)
from monitor.catalog.registry import ModelInfo
from monitor.models import Node, ServerProfile
from monitor.nodes.model_files import needed_files, source_for
from monitor.nodes.registry import local_node, place_on, this_node
from monitor.profiles.validation import BUILTIN_TEMPLATES, validate_profile

CACHE_CHOICES = [(name, name) for name in CACHE_TYPE_BYTES]


class DownloadForm(forms.Form):
    url = forms.URLField(label=_("File URL"), max_length=2000, assume_scheme="https")
    sha256 = forms.CharField(
        label=_("Expected SHA256 (optional; one per file for a multi-part set)"), required=False, max_length=2000
    )
    nodes = forms.ModelMultipleChoiceField(
        label=_("to nodes"),
        queryset=Node.objects.all(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text=_("Each node chosen downloads the file itself into its own models folder. None: this box's own."),
        initial=lambda: [(this_node() or local_node()).pk],
    )

    def chosen_nodes(self) -> list[Node]:
        return list(self.cleaned_data.get("nodes") or ()) or [this_node() or local_node()]


class PlannerForm(forms.Form):
    model = forms.ChoiceField(label=_("Model"))
    ctx_size = forms.IntegerField(label=_("Context size"), min_value=256, max_value=2_097_152, initial=8192)
    parallel = forms.IntegerField(label=_("Parallel slots"), min_value=1, max_value=64, initial=1)
    cache_type_k = forms.ChoiceField(label=_("K cache type"), choices=CACHE_CHOICES, initial="f16")
    cache_type_v = forms.ChoiceField(label=_("V cache type"), choices=CACHE_CHOICES, initial="f16")
    gpu_layers = forms.IntegerField(label=_("GPU layers"), min_value=0, max_value=1000, initial=0)
    cpu_moe_layers = forms.IntegerField(label=_("MoE layers on CPU"), min_value=0, max_value=1000, initial=0)
    ubatch = forms.IntegerField(label=_("Micro-batch"), min_value=1, max_value=65536, initial=512)
    free_vram_gib = forms.FloatField(label=_("Free VRAM (GiB)"), min_value=0, max_value=4096, initial=8)
    margin_gib = forms.FloatField(label=_("Safety margin (GiB)"), min_value=0, max_value=64, initial=1)
    mtp = forms.BooleanField(label=_("MTP speculative decoding (--spec-type draft-mtp)"), required=False)
    vision = forms.BooleanField(
        label=_("Load the vision projector (--mmproj), when the model has one"), required=False, initial=True
    )
    embeddings = forms.BooleanField(
        label=_("An embeddings or reranking model (--embeddings: no logits, no prompt cache)"), required=False
    )
    cache_ram_mib = forms.IntegerField(
        label=_("Prompt cache cap (MiB, --cache-ram; -1: no cap, 0: off)"),
        min_value=-1,
        max_value=10_000_000,
        initial=DEFAULT_CACHE_RAM_MIB,
        required=False,
    )
    ctx_checkpoints = forms.IntegerField(
        label=_("Context checkpoints per slot (--ctx-checkpoints)"),
        min_value=0,
        max_value=1024,
        initial=DEFAULT_CTX_CHECKPOINTS,
        required=False,
    )
    ram_margin_gib = forms.FloatField(
        label=_("RAM safety margin (GiB)"), min_value=0, max_value=1024, initial=2, required=False
    )
    gpu_bandwidth_gbs = forms.FloatField(
        label=_("GPU memory bandwidth (GB/s, for the speed estimate)"), min_value=1, max_value=100_000, required=False
    )
    ram_bandwidth_gbs = forms.FloatField(
        label=_("RAM bandwidth (GB/s, for the speed estimate)"), min_value=1, max_value=10_000, required=False
    )
    ask_llama = forms.BooleanField(
        initial=True,
        label=_("Ask llama.cpp for the compute buffers (runs its fit step, a few seconds)"),
        required=False,
    )
    # The profile whose settings these are (its nodes are marked in the plan per node).
    profile = forms.ModelChoiceField(
        queryset=ServerProfile.objects.filter(remote_url=""), required=False, widget=forms.HiddenInput
    )

    def __init__(self, *args, model_names: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["model"].choices = [(name, name) for name in model_names]
        if settings.DEFAULT_MODEL_FILE in model_names:
            self.fields["model"].initial = settings.DEFAULT_MODEL_FILE

    def plan_request(self) -> PlanRequest:
        """The plan asked for; an empty prompt cache cap or checkpoint count is the planner's default."""
        given = {name: value for name, value in self.cleaned_data.items() if value is not None}
        return PlanRequest(
            **{field.name: given[field.name] for field in dataclasses.fields(PlanRequest) if field.name in given}
        )

    @property
    def free_vram(self) -> int:
        return int(self.cleaned_data["free_vram_gib"] * GIB)

    @property
    def margin(self) -> int:
        return int(self.cleaned_data["margin_gib"] * GIB)

    @property
    def ram_margin(self) -> int:
        margin = self.cleaned_data["ram_margin_gib"]
        return int((2 if margin is None else margin) * GIB)


def planner_data(profile: ServerProfile, model: ModelInfo, free_vram_gib: float) -> dict:
    """The planner's fields for a profile's settings ("auto" and "all" GPU layers: every layer, the most
    it may take; the plan per node then says where that fits)."""
    layers = profile.gpu_layers.strip().lower()
    return {
        "profile": profile.pk, "model": model.path.name, "ctx_size": profile.ctx_size, "parallel": profile.parallel,
        "cache_type_k": profile.cache_type_k, "cache_type_v": profile.cache_type_v,
        "gpu_layers": int(layers) if layers.isdigit() else model.n_layer + 1, "cpu_moe_layers": profile.n_cpu_moe,
        "ubatch": profile.ubatch_size, "free_vram_gib": free_vram_gib, "margin_gib": 1,
        **({"vision": "on"} if profile.mmproj_file else {}),
        **({"embeddings": "on"} if not profile.is_chat else {}),
    }  # fmt: skip


class ServerProfileForm(forms.ModelForm):
    """Every field of a profile, each checked by validate_profile (one message per field)."""

    class Meta:
        model = ServerProfile
        fields = [
            "name", "description", "kind", "pooling", "available_to_users", "is_default", "load_on_startup",
            "model_file", "remote_url", "remote_api_key", "remote_model",
            "ctx_size", "gpu_layers", "n_cpu_moe", "cache_type_k", "cache_type_v", "flash_attn", "parallel",
            "batch_size", "ubatch_size", "threads",
            "draft_model_file", "draft_max", "draft_min", "mmproj_file", "scan_reader", "hang_limit_s",
            "reasoning", "reasoning_budget", "chat_template", "chat_template_jinja",
            "temperature", "top_p", "top_k", "min_p", "repeat_penalty", "extra_args",
        ]  # fmt: skip
        widgets = {
            "remote_api_key": forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
            "chat_template_jinja": forms.Textarea(attrs={"rows": 6, "spellcheck": "false"}),
            "extra_args": forms.TextInput(attrs={"spellcheck": "false"}),
        }

    def __init__(self, *args, model_names: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        files = [("", "—")] + [(name, name) for name in model_names]
        for field in ("model_file", "draft_model_file", "mmproj_file"):
            current = getattr(self.instance, field, "")
            choices = files + ([(current, current)] if current and current not in model_names else [])
            self.fields[field] = forms.ChoiceField(
                label=self.fields[field].label, choices=choices, required=False, help_text=self.fields[field].help_text
            )
        self.fields["cache_type_k"] = forms.ChoiceField(label=_("K cache type"), choices=CACHE_CHOICES)
        self.fields["cache_type_v"] = forms.ChoiceField(label=_("V cache type"), choices=CACHE_CHOICES)
        self.fields["chat_template"] = forms.ChoiceField(
            label=_("built-in chat template"),
            choices=[("", _("from the model file"))] + [(name, name) for name in BUILTIN_TEMPLATES],
            required=False,
        )
        if self.instance.pk and self.instance.remote_api_key:
            self.fields["remote_api_key"].help_text = _("A key is stored; leave empty to keep it.")
        self._stored_key = self.instance.remote_api_key if self.instance.pk else ""
        self.fields["nodes"] = forms.ModelMultipleChoiceField(
            label=_("served by"),
            queryset=Node.objects.all(),
            required=False,
            widget=forms.CheckboxSelectMultiple,
            help_text=_("Nodes that serve this profile; several make one pool with one line. None: this box's own."),
            initial=[placement.node_id for placement in self.instance.placements.all()] if self.instance.pk else [],
        )
        if self.instance.model_file:  # which nodes hold the saved model file (their registered files)
            self.fields["nodes"].label_from_instance = lambda node: node_label(node, self.instance.model_file)

    def save_placements(self, profile: ServerProfile, before: set[int]) -> tuple[list[Node], list[Node]]:
        """Place the saved profile on the chosen nodes; returns those it left (their revisions are unloaded)
        and those it joined, of the nodes it had ``before`` its save (where it loads when it serves:
        ``services.loads_where_placed``)."""
        if profile.is_remote:
            return [], []
        left = place_on(profile, list(self.cleaned_data.get("nodes") or ()))
        return left, [
            placement.node for placement in profile.placements.select_related("node") if placement.node_id not in before
        ]

    def clean_remote_api_key(self) -> str:
        return self.cleaned_data.get("remote_api_key") or self._stored_key

    def _post_clean(self) -> None:
        super()._post_clean()  # builds the instance from the cleaned data
        if not self.errors:
            try:
                validate_profile(self.instance)
            except ValidationError as error:
                self._update_errors(error)


def node_label(node: Node, model_file: str) -> str:
    """A node in "served by", said to lack the profile's model file where it does."""
    if model_file in files_on(node):
        return node.name
    return _("%(node)s (does not have %(file)s)") % {"node": node.name, "file": model_file}


class ApplyPlanForm(forms.Form):
    """The planner's recommendation, as the planner page posts it."""

    profile = forms.ModelChoiceField(queryset=ServerProfile.objects.all())
    gpu_layers = forms.IntegerField(min_value=0, max_value=10_000)
    ctx_size = forms.IntegerField(min_value=256, max_value=4_194_304)
    parallel = forms.IntegerField(min_value=1, max_value=256)
    cpu_moe_layers = forms.IntegerField(min_value=0, max_value=1000)
    # Checked by validate_profile, which names the cache types llama-server accepts.
    cache_type_k = forms.CharField(max_length=16)
    cache_type_v = forms.CharField(max_length=16)
    next = forms.CharField(required=False, max_length=2000)

    def clean_next(self) -> str:
        """Only a path of the planner page itself: never an address elsewhere."""
        target = self.cleaned_data.get("next", "")
        planner = reverse("monitor:planner")
        return target if target.startswith(planner) and "//" not in target and "\\" not in target else ""

    def plan_values(self) -> dict:
        keys = ("gpu_layers", "ctx_size", "parallel", "cpu_moe_layers", "cache_type_k", "cache_type_v")
        return {key: self.cleaned_data[key] for key in keys}


class NodeFileDownloadForm(forms.Form):
    """The profile page's button: a file the profile needs, to a node it is placed on (``url``: only where
    the file's first download is not known, or to fetch it from elsewhere)."""

    node = forms.ModelChoiceField(queryset=Node.objects.none())
    file = forms.CharField(max_length=255)
    url = forms.URLField(label=_("File URL"), required=False, max_length=2000, assume_scheme="https")

    def __init__(self, *args, profile: ServerProfile, **kwargs):
        super().__init__(*args, **kwargs)
        self.profile = profile
        self.fields["node"].queryset = Node.objects.filter(placements__profile=profile)
        self.url = self.expected_sha256 = ""

    def clean(self) -> dict:
        data = super().clean()
        name = data.get("file")
        if name is None:
            return data
        if name not in needed_files(self.profile):
            raise ValidationError(_("This profile does not use %(name)s.") % {"name": name[:100]})
        try:
            self.url, self.expected_sha256 = source_for(name, data.get("url") or "")
        except DownloadError as error:
            raise ValidationError(str(error)) from error
        return data

"""Sampling presets a person picks per conversation: names mapped to llama-server's sampling fields.

The names are the allowlist: a form offers only these, and a turn sends only the fields written here.
"""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _

SYSTEM_PROMPT_MAX_CHARS = 4000

PRESETS: dict[str, dict[str, float | int]] = {
    "precise": {"temperature": 0.2, "top_p": 0.8, "top_k": 20, "min_p": 0.05},
    "balanced": {"temperature": 0.7, "top_p": 0.95, "top_k": 40, "min_p": 0.05},
    "creative": {"temperature": 1.1, "top_p": 0.98, "top_k": 100, "min_p": 0.02},
}

PRESET_LABELS = {
    "": _("Profile default"),
    "precise": _("Precise"),
    "balanced": _("Balanced"),
    "creative": _("Creative"),
}


def preset_choices() -> list[tuple[str, str]]:
    return [(name, str(label)) for name, label in PRESET_LABELS.items()]


def sampling_fields(preset: str) -> dict[str, float | int]:
    """The request fields of a preset; an unknown or empty name sends none (the profile decides)."""
    return dict(PRESETS.get(preset, {}))

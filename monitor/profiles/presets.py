"""The router's model presets: one INI section per served revision of each local profile.

llama-server reads the file at start and again on ``GET /models?reload=1``; a section
that did not change keeps its running instance, a changed or removed one is unloaded.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from django.conf import settings

from monitor.models import ServerProfile
from monitor.profiles.options import Option, profile_options, write_template


def served_id(name: str, revision: int) -> str:
    return f"{name}@{revision}"


def live_id(profile: ServerProfile) -> str:
    """The id requests go to: the live revision, or the current one before any has loaded."""
    return served_id(profile.name, profile.live_revision or profile.revision)


def parse_served_id(model_id: str) -> tuple[str, int] | None:
    name, sep, revision = model_id.rpartition("@")
    return (name, int(revision)) if sep and revision.isdigit() else None


def preset_path() -> Path:
    return Path(settings.VAR_DIR) / "run" / "models-preset.ini"


def current_options(profile: ServerProfile) -> list[Option]:
    return [tuple(option) for option in profile.revision_options] or profile_options(profile)


def sections(profile: ServerProfile) -> dict[str, list[Option]]:
    """Served id -> options: the current revision, and the live one while it differs."""
    result = {served_id(profile.name, profile.revision): current_options(profile)}
    if profile.live_revision and profile.live_revision != profile.revision and profile.live_options:
        result[served_id(profile.name, profile.live_revision)] = [tuple(option) for option in profile.live_options]
    return result


def _value(value: str | None) -> str:
    return "true" if value is None else value


def preset_text(profiles: list[ServerProfile]) -> str:
    lines = [
        "version = 1",
        "",
        "[*]",
        "metrics = true",
        "slots = true",
        f"stop-timeout = {settings.LLAMA_STOP_TIMEOUT_S}",
    ]
    for profile in profiles:
        if profile.is_remote or not profile.model_file:
            continue
        # No load-on-startup here: a section that changes is unloaded by the router, so
        # making another profile the default would unload both; the supervisor loads them.
        for model_id, options in sections(profile).items():
            lines += ["", f"[{model_id}]"]
            lines += [f"{name.lstrip('-')} = {_value(value)}" for name, value in options]
    return "\n".join(lines) + "\n"


def write_preset() -> Path:
    """Write the presets of every local profile (and their templates); atomic."""
    profiles = list(ServerProfile.objects.all())
    for profile in profiles:
        if not profile.is_remote:
            write_template(profile)
    path = preset_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    # The web process, the worker and the supervisor all write it: each through its own temporary file.
    handle, partial = tempfile.mkstemp(dir=path.parent, prefix=".models-preset-", suffix=".tmp")
    with os.fdopen(handle, "w") as out:
        out.write(preset_text(profiles))
    os.replace(partial, path)
    return path

"""The router's model presets: one INI section per served revision of each local profile.

llama-server reads the file at start and again on ``GET /models?reload=1``; a section
that did not change keeps its running instance, a changed or removed one is unloaded.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from django.conf import settings

from monitor.models import Placement, ServerProfile
from monitor.nodes.registry import placed_revisions_here, placements_here
from monitor.profiles.options import Option, profile_options, write_template


def served_id(name: str, revision: int) -> str:
    return f"{name}@{revision}"


def live_id(profile: ServerProfile, placement: Placement | None) -> str:
    """The id requests go to on a node: its live revision there, or the current one before any loaded."""
    live = placement.live_revision if placement is not None else None
    return served_id(profile.name, live or profile.revision)


def live_ids_here() -> dict[str, str]:
    """Each local profile placed on this node -> the id requests go to here (``live_id``), in one query."""
    return {name: served_id(name, live or revision) for name, revision, live in placed_revisions_here()}


def parse_served_id(model_id: str) -> tuple[str, int] | None:
    name, sep, revision = model_id.rpartition("@")
    return (name, int(revision)) if sep and revision.isdigit() else None


def preset_path() -> Path:
    return Path(settings.VAR_DIR) / "run" / "models-preset.ini"


def current_options(profile: ServerProfile) -> list[Option]:
    return [tuple(option) for option in profile.revision_options] or profile_options(profile)


def sections(placement: Placement) -> dict[str, list[Option]]:
    """Served id -> options on the placement's node: the current revision, and the live one there while it differs."""
    profile = placement.profile
    result = {served_id(profile.name, profile.revision): current_options(profile)}
    live = placement.live_revision
    if live and live != profile.revision and placement.live_options:
        result[served_id(profile.name, live)] = [tuple(option) for option in placement.live_options]
    return result


def preset_text(placements: list[Placement]) -> str:
    lines = [
        "version = 1",
        "",
        "[*]",
        "metrics = true",
        "slots = true",
        f"stop-timeout = {settings.LLAMA_STOP_TIMEOUT_S}",
    ]
    for placement in placements:
        if placement.profile.is_remote or not placement.profile.model_file:
            continue
        # No load-on-startup here: a section that changes is unloaded by the router, so
        # making another profile the default would unload both; the supervisor loads them.
        for model_id, options in sections(placement).items():
            lines += ["", f"[{model_id}]"]
            lines += [f"{name.lstrip('-')} = {'true' if value is None else value}" for name, value in options]
    return "\n".join(lines) + "\n"


def write_preset() -> Path:
    """Write the presets of every profile this node serves (and their templates); atomic."""
    placements = list(placements_here())
    for placement in placements:
        write_template(placement.profile)
    path = preset_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    # The web process, the worker and the supervisor all write it: each through its own temporary file.
    handle, partial = tempfile.mkstemp(dir=path.parent, prefix=".models-preset-", suffix=".tmp")
    with os.fdopen(handle, "w") as out:
        out.write(preset_text(placements))
    os.replace(partial, path)
    return path

"""What the router says of each served id, and what that means for a profile (loaded, loading, failed...)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from monitor.llama.client import LlamaClient, get_client
from monitor.models import ServerProfile
from monitor.profiles.presets import live_id, served_id

STATUS_CACHE_S = 1.0


@dataclass
class ProfileState:
    state: str  # loaded, loading, unloaded, failed, remote, down
    served_id: str
    pending_revision: bool  # the saved settings are not the ones serving
    exit_code: int | None = None


_status_cache: tuple[float, dict[str, dict]] | None = None


async def router_status(client: LlamaClient | None = None, *, fresh: bool = False) -> dict[str, dict]:
    """Model id -> the router's status object; raises LlamaUnavailable when it is down."""
    global _status_cache
    now = time.monotonic()
    if not fresh and _status_cache and now - _status_cache[0] < STATUS_CACHE_S:
        return _status_cache[1]
    models = await (client or get_client()).list_models()
    statuses = {model["id"]: model.get("status", {}) for model in models}
    _status_cache = (now, statuses)
    return statuses


def forget_status() -> None:
    global _status_cache
    _status_cache = None


def state_of(profile: ServerProfile, statuses: dict[str, dict]) -> ProfileState:
    if profile.is_remote:
        return ProfileState("remote", profile.remote_model or "", False)
    current = served_id(profile.name, profile.revision)
    pending = bool(profile.live_revision) and profile.live_revision != profile.revision
    for model_id in (current, live_id(profile)):
        status = statuses.get(model_id, {})
        value = status.get("value", "unloaded")
        if value in ("loaded", "sleeping", "loading"):
            return ProfileState(value, model_id, pending and model_id != current)
    status = statuses.get(current, {})
    if status.get("failed"):
        return ProfileState("failed", current, pending, status.get("exit_code"))
    return ProfileState("unloaded", live_id(profile), pending)

"""What the router says of each served id, and what that means for a profile (loaded, loading, failed...)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from monitor.llama.client import LlamaClient, local_client
from monitor.models import Placement, ServerProfile
from monitor.profiles.presets import live_id, served_id

STATUS_CACHE_S = 1.0


@dataclass
class ProfileState:
    state: str  # loaded, loading, unloaded, failed, remote, down
    served_id: str
    pending_revision: bool  # the saved settings are not the ones serving


_status_cache: dict[str, tuple[float, dict[str, dict]]] = {}


async def router_status(
    client: LlamaClient | None = None, *, fresh: bool = False, max_age_s: float = STATUS_CACHE_S
) -> dict[str, dict]:
    """Model id -> a router's status object (this node's, unless ``client`` names another); raises
    LlamaUnavailable when it is down. The router's last answer (fresh ones included) serves callers that
    do not ask for a fresh one while it is younger than ``max_age_s`` (a chat turn, a page's poll)."""
    client = client or local_client()
    now = time.monotonic()
    cached = _status_cache.get(client.base_url)
    if not fresh and cached and now - cached[0] < max_age_s:
        return cached[1]
    models = await client.list_models()
    statuses = {model["id"]: model.get("status", {}) for model in models}
    _status_cache[client.base_url] = (now, statuses)
    return statuses


def forget_status() -> None:
    _status_cache.clear()


def state_of(profile: ServerProfile, statuses: dict[str, dict], placement: Placement | None = None) -> ProfileState:
    """The profile's state on one node, from that node's router statuses and its placement there."""
    if profile.is_remote:
        return ProfileState("remote", profile.remote_model or "", False)
    current = served_id(profile.name, profile.revision)
    live = placement.live_revision if placement is not None else None
    pending = bool(live) and live != profile.revision
    for model_id in (current, live_id(profile, placement)):
        value = statuses.get(model_id, {}).get("value", "unloaded")
        if value in ("loaded", "sleeping", "loading"):
            return ProfileState(value, model_id, pending and model_id != current)
    if statuses.get(current, {}).get("failed"):
        return ProfileState("failed", current, pending)
    return ProfileState("unloaded", live_id(profile, placement), pending)

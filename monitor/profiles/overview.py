"""What the profile pages show of each profile: its state in the router, its last event, its log tail."""

from __future__ import annotations

from asgiref.sync import async_to_sync
from django.utils.translation import gettext as _

from monitor.llama.errors import LlamaError
from monitor.llama.logs import instance_log_tail
from monitor.models import Event, ServerProfile
from monitor.profiles.presets import live_id, served_id
from monitor.profiles.status import router_status, state_of


def router_statuses() -> tuple[dict[str, dict], str]:
    """Served id -> the router's status, and why there is none ("" when llama-server answered)."""
    try:
        return async_to_sync(router_status)(fresh=True), ""
    except LlamaError as error:
        return {}, str(error)


def state_labels() -> dict[str, str]:
    return {
        "loaded": _("loaded"),
        "loading": _("loading"),
        "sleeping": _("sleeping"),
        "unloaded": _("unloaded"),
        "failed": _("failed"),
        "remote": _("remote"),
        "down": _("llama-server down"),
    }


def profile_payload(profile: ServerProfile, statuses: dict[str, dict], *, with_log: bool = False) -> dict:
    state = state_of(profile, statuses) if statuses or profile.is_remote else None
    last = Event.objects.filter(profile=profile.name).first()
    payload = {
        "id": profile.pk,
        "name": profile.name,
        "state": state.state if state else "down",
        "state_label": state_labels()[state.state if state else "down"],
        "served_id": state.served_id if state else live_id(profile),
        "pending": bool(state and state.pending_revision),
        "revision": profile.revision,
        "live_revision": profile.live_revision,
        "last_event": {"kind": last.kind, "level": last.level, "message": last.message, "at": last.created_at}
        if last
        else None,
    }
    if with_log and not profile.is_remote:
        current = served_id(profile.name, profile.revision)
        payload["log_tail"] = instance_log_tail(current) or instance_log_tail(live_id(profile))
    return payload

"""What the profile pages show of each profile: its state on each node that serves it (that node's router
asked), its last event, its log tail (this node's)."""

from __future__ import annotations

import asyncio
import time

from asgiref.sync import async_to_sync
from django.conf import settings
from django.utils.translation import gettext as _

from monitor.llama.errors import LlamaError
from monitor.llama.logs import instance_log_tail
from monitor.models import Event, Node, Placement, ServerProfile
from monitor.nodes.registry import placements_of
from monitor.profiles.clients import node_client
from monitor.profiles.presets import live_id, served_id
from monitor.profiles.status import router_status, state_of

NodeStatuses = dict[str, tuple[dict[str, dict], str]]
# How old a router's answer may be for a page's poll (profiles.js): however many tabs follow a load, each
# router is asked about once in this long. A page drawn after an action asks afresh.
POLL_STATUS_AGE_S = 2.0
# Overall states that change by themselves: a load under way, llama-server down (its supervisor restarts it).
MOVING_STATES = ("loading", "down")
SERVED_STATES = ("loaded", "sleeping")  # a model instance up on its node
SERVING_STATES = (*SERVED_STATES, "loading")
LOAD_ENDED = (Event.Kind.PROFILE_LOADED, Event.Kind.PROFILE_FAILED)


def router_statuses(*, max_age_s: float = 0.0) -> NodeStatuses:
    """Per node: served id -> its router's status, and why there is none ("" when the router answered).

    ``max_age_s``: how old a router's answer will do (0: every router is asked now).
    """
    return async_to_sync(_all_statuses)(list(Node.objects.all()), max_age_s)


async def _all_statuses(nodes: list[Node], max_age_s: float) -> NodeStatuses:
    async def one(node: Node) -> tuple[dict[str, dict], str]:
        try:
            return await router_status(node_client(node, None), fresh=max_age_s <= 0, max_age_s=max_age_s), ""
        except LlamaError as error:
            return {}, str(error)

    answers = await asyncio.gather(*(one(node) for node in nodes))
    return {node.name: answer for node, answer in zip(nodes, answers, strict=True)}


def watch_limit_s() -> float:
    """How long a page follows an action it started: past this its task never ran (or never ended)."""
    return settings.PROFILE_LOAD_TIMEOUT_S + settings.PROFILE_DRAIN_S + 60


def started_action(kind: str) -> dict:
    """A load or unload an admin starts now, as their session keeps it (see ``in_motion``)."""
    return {"kind": kind, "at": time.time()}


def current_actions(started: dict[str, dict]) -> dict[str, dict]:
    """The started actions still worth following (profile id -> action)."""
    return {key: action for key, action in started.items() if time.time() - action["at"] < watch_limit_s()}


def _unfinished(payload: dict, action: dict | None) -> bool:
    if action is None or time.time() - action["at"] >= watch_limit_s():
        return False
    if action["kind"] == "unload":
        return payload["state"] in SERVING_STATES  # served on any node
    # A load ends with its event (loaded or failed), written by a node's worker once its router settled.
    last = payload["last_event"]
    if not (last and last["kind"] in LOAD_ENDED and last["at"].timestamp() >= action["at"]):
        return True
    # The event is read fresh, the router's answer may be up to POLL_STATUS_AGE_S older: a load that ended
    # loaded is followed until the page shows it served, not left on the state from before it.
    return last["kind"] == Event.Kind.PROFILE_LOADED and payload["state"] not in SERVED_STATES


def in_motion(payloads: list[dict], started: dict[str, dict]) -> bool:
    """Whether anything these profiles show can still change by itself: a profile loading, llama-server
    down, or an action the admin started (``started``: profile id -> action) that has not ended."""
    return any(
        payload["state"] in MOVING_STATES or _unfinished(payload, started.get(str(payload["id"])))
        for payload in payloads
    )


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


# The profile's state on the page, of its nodes' states: the best one wins (it serves if any node does).
STATE_ORDER = ("loaded", "sleeping", "loading", "failed", "unloaded", "down")


def profile_payload(profile: ServerProfile, statuses: NodeStatuses, *, with_log: bool = False) -> dict:
    placements = placements_of(profile) if not profile.is_remote else []
    nodes = [_node_payload(profile, placement, statuses.get(placement.node.name, ({}, ""))) for placement in placements]
    if profile.is_remote:
        state = state_of(profile, {})
        overall, served, pending = state.state, state.served_id, False
    elif nodes:
        best = min(nodes, key=lambda node: STATE_ORDER.index(node["state"]))
        overall, served, pending = best["state"], best["served_id"], any(node["pending"] for node in nodes)
    else:
        overall, served, pending = "unloaded", served_id(profile.name, profile.revision), False
    last = Event.objects.filter(profile=profile.name).first()
    payload = {
        "id": profile.pk,
        "name": profile.name,
        "state": overall,
        "state_label": state_labels()[overall],
        "served_id": served,
        "pending": pending,
        "revision": profile.revision,
        "nodes": nodes,
        "last_event": {"kind": last.kind, "level": last.level, "message": last.message, "at": last.created_at}
        if last
        else None,
    }
    if with_log and not profile.is_remote:
        here = next((p for p in placements if p.node.name == settings.NODE_NAME), None)
        current = served_id(profile.name, profile.revision)
        payload["log_tail"] = instance_log_tail(current) or instance_log_tail(live_id(profile, here))
    return payload


def _node_payload(profile: ServerProfile, placement: Placement, answer: tuple[dict[str, dict], str]) -> dict:
    statuses, down = answer
    state = state_of(profile, statuses, placement) if not down else None
    value = state.state if state else "down"
    return {
        "node": placement.node.name,
        "state": value,
        "state_label": state_labels()[value],
        "served_id": state.served_id if state else live_id(profile, placement),
        "pending": bool(state and state.pending_revision),
        "live_revision": placement.live_revision,
        "error": placement.error,
    }

"""What the profile pages show of each profile: its state on each node that serves it (that node's router
asked), its last event, its log tail (this node's)."""

from __future__ import annotations

import asyncio

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


def router_statuses() -> NodeStatuses:
    """Per node: served id -> its router's status, and why there is none ("" when the router answered)."""
    return async_to_sync(_all_statuses)(list(Node.objects.all()))


async def _all_statuses(nodes: list[Node]) -> NodeStatuses:
    async def one(node: Node) -> tuple[dict[str, dict], str]:
        try:
            return await router_status(node_client(node, None), fresh=True), ""
        except LlamaError as error:
            return {}, str(error)

    answers = await asyncio.gather(*(one(node) for node in nodes))
    return {node.name: answer for node, answer in zip(nodes, answers, strict=True)}


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

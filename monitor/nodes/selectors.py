"""Reads for the staff Nodes page: each node with its facts and heartbeat, open join tokens, refusals."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from django.conf import settings

from monitor.models import Event, JoinToken, Node
from monitor.nodes import database_roles, readiness
from monitor.redis_clients import REDIS_DOWN

REFUSALS_SHOWN = 20


@dataclass
class NodeRow:
    node: Node
    beat: dict | None  # its last heartbeat (None: none within READY_TTL_S, or Redis is away)
    placed: list[str] = field(default_factory=list)  # the profiles placed on it

    @property
    def up(self) -> bool:
        return self.beat is not None

    @property
    def beat_age_s(self) -> float | None:
        return max(0.0, time.time() - self.beat["at"]) if self.beat else None

    @property
    def router_answers(self) -> bool:
        return bool(self.beat and self.beat.get("router"))

    @property
    def serving(self) -> list[str]:
        return sorted((self.beat or {}).get("serving") or {})


def node_rows() -> list[NodeRow]:
    nodes = list(Node.objects.prefetch_related("placements__profile"))
    try:
        beats = readiness.beats([node.name for node in nodes])
    except REDIS_DOWN:
        beats = {}
    return [
        NodeRow(node, beats.get(node.name), sorted(p.profile.name for p in node.placements.all())) for node in nodes
    ]


def open_tokens() -> list[JoinToken]:
    """Join tokens not used and not revoked (an expired one is listed until revoked: it says so)."""
    return list(JoinToken.objects.filter(used_at__isnull=True, revoked_at__isnull=True).select_related("created_by"))


def refusals() -> list[Event]:
    return list(Event.objects.filter(kind=Event.Kind.NODE_REFUSED)[:REFUSALS_SHOWN])


def database_access() -> str:
    """How nodes reach the database: sqlite, role (a role per node) or shared (the app's own account)."""
    return database_roles.access()


def redis_loopback_only() -> bool:
    """The main box's Redis listens on loopback only (QWENWEB_REDIS_BIND): no other box can reach it."""
    addresses = settings.REDIS_BIND.replace(",", " ").split()
    return all(part.startswith("127.") or part in ("localhost", "::1") for part in addresses)

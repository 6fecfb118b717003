"""A pool's members: the nodes a profile is placed on, and where each is reached.

They come from the database, and each process keeps them while Redis's placements' token stays the one
they were read at: a placement made or removed, or a node added, removed, renamed or moved, sets a new
one once committed (``monitor.nodes.registry.watch_placements``), so the very next request sees it. The
token is read in the round trip that reads the members' readiness (``pool_now``): while nothing changed,
a request makes no hop to a database thread for them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from asgiref.sync import sync_to_async

from monitor.models import ServerProfile
from monitor.nodes import readiness
from monitor.nodes.registry import address, nodes_serving


def remote_node(profile: ServerProfile) -> str:
    """A remote profile's server as a pool of one: it has no heartbeat, the app reads it itself."""
    return f"remote-{profile.pk}"


Members = dict[str, tuple[str, str]]  # node name -> (its router's URL, its key)
Served = dict[str, tuple[int, str]]  # node -> (slots, served id)
# A pool's members are kept while the placements' token is the one they were read at (a placement
# made or removed, a node moved, gives a new one: ``readiness.placements_changed``) and at most
# MEMBERS_MAX_AGE_S (a change made outside Django's ORM gives none). Members whose token was seen
# unchanged less than MEMBERS_CHECK_S ago are taken as they are (a slot right after its pool was read,
# the waiters of a long line looking again on their own).
MEMBERS_MAX_AGE_S = 30.0
MEMBERS_CHECK_S = 1.0


@dataclass
class _KnownMembers:
    token: str | None  # the placements' token read just before them (None: Redis was away)
    members: Members
    read_at: float = field(default_factory=time.monotonic)
    checked_at: float = field(default_factory=time.monotonic)  # when the token was last seen unchanged

    def current(self, token: str | None) -> bool:
        """Whether they are still the pool's, the placements' token being ``token`` now."""
        now = time.monotonic()
        if now - self.read_at > MEMBERS_MAX_AGE_S or token is None or token != self.token:
            return False
        self.checked_at = now
        return True

    def checked_lately(self) -> bool:
        now = time.monotonic()
        return now - self.checked_at <= MEMBERS_CHECK_S and now - self.read_at <= MEMBERS_MAX_AGE_S


_members: dict[int, _KnownMembers] = {}


def pool_members(profile: ServerProfile) -> Members:
    """The nodes that may serve a profile and where each is reached (a remote profile: its own server)."""
    if profile.is_remote:
        return {remote_node(profile): (profile.remote_url.rstrip("/"), profile.remote_api_key)}
    return {node.name: address(node) for node in nodes_serving(profile)}


def pool_nodes(profile: ServerProfile) -> list[str]:
    return list(pool_members(profile))


async def _read_members(profile: ServerProfile, token: str | None) -> Members:
    """The pool's members from the database, kept as of ``token`` (read before them)."""
    members = await sync_to_async(pool_members)(profile)
    _members[profile.pk] = _KnownMembers(token, members)
    return members


async def members_now(profile: ServerProfile) -> Members:
    """The pool's members as of now: the kept ones while the placements' token has not changed (not
    read again when it was seen unchanged less than MEMBERS_CHECK_S ago)."""
    if profile.is_remote:
        return pool_members(profile)
    known = _members.get(profile.pk)
    if known is not None and known.checked_lately():
        return known.members
    token = await readiness.placements_token()
    if known is not None and known.current(token):
        return known.members
    return await _read_members(profile, token)


async def pool_now(profile: ServerProfile) -> tuple[Members, Served]:
    """The pool's members and those of them that serve it now: one round trip to Redis while no
    placement changed (the members' readiness and the placements' token together)."""
    known = _members.get(profile.pk)
    if known is not None and not profile.is_remote:
        served, token = await readiness.served_and_token(list(known.members), profile.name)
        if known.current(token):
            return known.members, served
        members = await _read_members(profile, token)
    else:
        members = await members_now(profile)
    return members, await readiness.served_on(list(members), profile.name)

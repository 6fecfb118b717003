"""A pool's members: the nodes a profile is placed on, and where each is reached, read from the database
at each request (so the very next request sees a placement made or removed): a cache of them saved too
little to be worth its invalidation (docs/performance.md)."""

from __future__ import annotations

from asgiref.sync import sync_to_async

from monitor.models import ServerProfile
from monitor.nodes import readiness
from monitor.nodes.registry import address, nodes_serving

Members = dict[str, tuple[str, str]]  # node name -> (its router's URL, its key)
Served = dict[str, tuple[int, str]]  # node -> (slots, served id)


def pool_members(profile: ServerProfile) -> Members:
    """The nodes that may serve a profile and where each is reached (a remote profile: its own server)."""
    if profile.is_remote:  # its server as a pool of one: it has no heartbeat, the app reads it itself
        return {f"remote-{profile.pk}": (profile.remote_url.rstrip("/"), profile.remote_api_key)}
    return {node.name: address(node) for node in nodes_serving(profile)}


async def members_now(profile: ServerProfile) -> Members:
    """The pool's members as the database has them now (a placement made a moment ago included)."""
    if profile.is_remote:
        return pool_members(profile)
    return await sync_to_async(pool_members)(profile)


async def pool_now(profile: ServerProfile) -> tuple[Members, Served]:
    """The pool's members and those of them that serve it now."""
    members = await members_now(profile)
    return members, await readiness.served_on(list(members), profile.name)

"""Clients for the llama-servers that serve profiles: a node's router (a model id per served revision),
or a remote profile's own server with its own key; all kept by ``monitor.llama.client.client_at``.
Requests for people go through ``monitor.serving`` (the queue picks the node); these are its clients.
"""

from __future__ import annotations

from monitor.llama.client import LlamaClient, client_at, local_client
from monitor.models import Node, Placement, ServerProfile
from monitor.nodes.registry import address
from monitor.profiles.presets import live_id


def remote_client(profile: ServerProfile) -> LlamaClient:
    """A remote profile's own llama-server, with its own key (and model name, for a remote router)."""
    return client_at(profile.remote_url, profile.remote_api_key, profile.remote_model or None)


def node_client(node: Node, model: str | None) -> LlamaClient:
    """A node's llama-server router, for ``model`` (a served id) or for the router itself (None)."""
    return client_at(*address(node), model)


def profile_client(profile: ServerProfile, placement: Placement | None) -> LlamaClient:
    """The profile's live revision on the placement's node (or its remote server)."""
    if profile.is_remote:
        return remote_client(profile)
    if placement is None:
        return local_client(live_id(profile, None))
    return node_client(placement.node, live_id(profile, placement))

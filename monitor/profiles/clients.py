"""Clients for the llama-servers that serve profiles: a node's router (a model id per served revision),
or a remote profile's own server with its own key. Clients are kept per (URL, key, model).
Requests for people go through ``monitor.serving`` (the queue picks the node); these are its clients.
"""

from __future__ import annotations

from django.conf import settings

from monitor.llama.client import LlamaClient
from monitor.models import Node, Placement, ServerProfile
from monitor.nodes.registry import address
from monitor.profiles.presets import live_id

_clients: dict[tuple[str, str, str | None], LlamaClient] = {}


def client_at(base_url: str, api_key: str, model: str | None) -> LlamaClient:
    """The kept client for a llama-server at ``base_url`` with ``api_key``, naming ``model`` (or none)."""
    key = (base_url, api_key, model)
    client = _clients.get(key)
    if client is None:
        client = _clients[key] = LlamaClient(base_url=base_url, api_key=api_key, model=model)
    return client


def remote_client(profile: ServerProfile) -> LlamaClient:
    """A remote profile's own llama-server, with its own key (and model name, for a remote router)."""
    return client_at(profile.remote_url.rstrip("/"), profile.remote_api_key, profile.remote_model or None)


def node_client(node: Node, model: str | None) -> LlamaClient:
    """A node's llama-server router, for ``model`` (a served id) or for the router itself (None)."""
    url, key = address(node)
    return client_at(url, key, model)


def here_client(model: str | None = None) -> LlamaClient:
    """This node's own router (for ``model``, or itself)."""
    return client_at(settings.LLAMA_SERVER_URL.rstrip("/"), settings.LLAMA_API_KEY, model)


def profile_client(profile: ServerProfile, placement: Placement | None) -> LlamaClient:
    """The profile's live revision on the placement's node (or its remote server)."""
    if profile.is_remote:
        return remote_client(profile)
    if placement is None:
        return here_client(live_id(profile, None))
    return node_client(placement.node, live_id(profile, placement))


def local_server_client() -> LlamaClient:
    """This node's llama-server router itself, not bound to a model id (``/models``)."""
    return here_client(None)

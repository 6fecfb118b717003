"""Clients for the llama-servers that serve profiles: a node's router (a model id per served revision),
or a remote profile's own server with its own key. Clients are kept per (URL, key, model).
Requests for people go through ``monitor.serving`` (the queue picks the node); these are its clients.
"""

from __future__ import annotations

from django.conf import settings

from monitor.llama.client import LlamaClient
from monitor.models import ServerProfile
from monitor.profiles.presets import live_id

_clients: dict[tuple[str, str, str | None], LlamaClient] = {}


def _client(base_url: str, api_key: str, model: str | None) -> LlamaClient:
    key = (base_url, api_key, model)
    client = _clients.get(key)
    if client is None:
        client = _clients[key] = LlamaClient(base_url=base_url, api_key=api_key, model=model)
    return client


def remote_client(profile: ServerProfile) -> LlamaClient:
    """A remote profile's own llama-server, with its own key (and model name, for a remote router)."""
    return _client(profile.remote_url.rstrip("/"), profile.remote_api_key, profile.remote_model or None)


def node_client(node: str, model: str | None) -> LlamaClient:
    """A node's llama-server router, for ``model`` (a served id) or for the router itself (None)."""
    return _client(settings.LLAMA_SERVER_URL.rstrip("/"), settings.LLAMA_API_KEY, model)


def profile_client(profile: ServerProfile) -> LlamaClient:
    """The profile's live revision on this box's node (or its remote server)."""
    if profile.is_remote:
        return remote_client(profile)
    return node_client(settings.NODE_NAME, live_id(profile))


def local_server_client() -> LlamaClient:
    """The local llama-server itself, not bound to a model id (router-level requests such as ``/models``)."""
    return node_client(settings.NODE_NAME, None)

"""Which llama-server (and which model id on it) answers for a server profile.

Everything that sends a request for a profile asks here: ``profile_client(profile)`` gives
a ``LlamaClient`` bound to the right base URL, API key and router model id. Local
profiles go through the one local llama-server (router mode, model id per profile);
remote profiles go to their own llama-server with their own key.
"""

from __future__ import annotations

from asgiref.sync import sync_to_async
from django.conf import settings

from monitor.llama.client import LlamaClient
from monitor.models import ServerProfile
from monitor.profiles.loading import ensure_serving
from monitor.profiles.presets import live_id
from monitor.profiles.selectors import find_profile

_clients: dict[tuple[str, str, str | None], LlamaClient] = {}


def _client(base_url: str, api_key: str, model: str | None) -> LlamaClient:
    key = (base_url, api_key, model)
    client = _clients.get(key)
    if client is None:
        client = _clients[key] = LlamaClient(base_url=base_url, api_key=api_key, model=model)
    return client


def profile_client(profile: ServerProfile) -> LlamaClient:
    if profile.is_remote:
        return _client(profile.remote_url.rstrip("/"), profile.remote_api_key, profile.remote_model or None)
    return _client(settings.LLAMA_SERVER_URL.rstrip("/"), settings.LLAMA_API_KEY, live_id(profile))


def local_server_client() -> LlamaClient:
    """The local llama-server itself, not bound to a model id (router-level requests such as ``/models``)."""
    return _client(settings.LLAMA_SERVER_URL.rstrip("/"), settings.LLAMA_API_KEY, None)


async def current_client(profile: ServerProfile) -> LlamaClient:
    """The profile's client as of now: a change may have gone live while a request waited its turn."""
    if profile.is_remote:
        return profile_client(profile)
    return profile_client(await sync_to_async(ServerProfile.objects.get)(pk=profile.pk))


async def ready_client(
    profile: ServerProfile | str | None, *, for_users: bool = False
) -> tuple[ServerProfile, LlamaClient]:
    """The profile and a client for it, its live revision loaded first when it is local.

    Raises ProfileUnavailable for an unknown profile, LoadFailed when it cannot load.
    """
    if not isinstance(profile, ServerProfile):
        profile = await sync_to_async(find_profile)(profile, for_users=for_users)
    if not profile.is_remote and await ensure_serving(profile) != live_id(profile):
        # Its first load just went live: read the revision that now serves.
        profile = await sync_to_async(ServerProfile.objects.get)(pk=profile.pk)
    return profile, profile_client(profile)

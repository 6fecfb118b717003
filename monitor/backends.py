"""Which llama-server (and which model id on it) answers for a server profile.

Everything that sends a request for a profile asks here: ``client_for(profile)`` gives
a ``LlamaClient`` bound to the right base URL, API key and router model id. Local
profiles go through the one local llama-server (router mode, model id per profile);
remote profiles go to their own llama-server with their own key.
"""

from __future__ import annotations

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db.models import QuerySet
from django.utils.translation import gettext_lazy as _

from monitor.llama_client import LlamaClient, LlamaError
from monitor.models import ServerProfile
from monitor.presets import live_id


class ProfileUnavailable(LlamaError):
    default_message = _("This server profile is not available.")


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


def find_profile(name: str | None = None, *, for_users: bool = False) -> ServerProfile:
    """The named profile, or the default one; ProfileUnavailable when there is none to use."""
    profiles = user_profiles() if for_users else ServerProfile.objects.all()
    if name:
        profile = profiles.filter(name=name).first()
    else:
        profile = profiles.filter(is_default=True).first() or profiles.first()
    if profile is None:
        raise ProfileUnavailable(_("No server profile named %(name)s is available.") % {"name": name or "default"})
    return profile


def client_for(profile: ServerProfile | str | None = None, *, for_users: bool = False) -> LlamaClient:
    if not isinstance(profile, ServerProfile):
        profile = find_profile(profile, for_users=for_users)
    return profile_client(profile)


aclient_for = sync_to_async(client_for)


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
    from monitor.switching import ensure_serving  # switching builds on the presets, not on this module

    if not isinstance(profile, ServerProfile):
        profile = await sync_to_async(find_profile)(profile, for_users=for_users)
    if not profile.is_remote and await ensure_serving(profile) != live_id(profile):
        # Its first load just went live: read the revision that now serves.
        profile = await sync_to_async(ServerProfile.objects.get)(pk=profile.pk)
    return profile, profile_client(profile)


def user_profiles() -> QuerySet[ServerProfile]:
    """The profiles people may pick for a conversation or name as an API model."""
    return ServerProfile.objects.filter(available_to_users=True)

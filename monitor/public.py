"""What ``monitor`` publishes for ``chat``: the one module chat may import from monitor.

Chat needs a client for a server profile (loaded first when it is local), what that
profile serves, the profiles people may use, the errors to tell them about, and two
hooks into the dashboard (request figures, queue overflows on the timeline).
Everything else of monitor is private to it; ``make lint`` checks that.
"""

from __future__ import annotations

from asgiref.sync import sync_to_async

from monitor import timeline
from monitor.llama.client import LlamaClient
from monitor.llama.errors import LlamaError, LlamaRejected, LlamaStreamBroken, LlamaUnavailable
from monitor.llama.serving import ServingInfo, forget_serving_info, serving_info
from monitor.models import Event, ServerProfile
from monitor.profiles.clients import current_client, ready_client
from monitor.profiles.errors import LoadFailed, ProfileUnavailable
from monitor.profiles.presets import live_id
from monitor.profiles.selectors import find_profile, user_profiles
from monitor.profiles.status import router_status
from monitor.telemetry.dashboard import percentile, register_request_figures

__all__ = [
    "LlamaClient",
    "LlamaError",
    "LlamaRejected",
    "LlamaStreamBroken",
    "LlamaUnavailable",
    "LoadFailed",
    "ProfileUnavailable",
    "ServerProfile",
    "ServingInfo",
    "conversation_profile",
    "current_client",
    "find_profile",
    "forget_serving_info",
    "needs_loading",
    "percentile",
    "ready_client",
    "record_queue_overflow",
    "register_request_figures",
    "serving_info",
    "user_profiles",
]


def conversation_profile(profile_id: int | None) -> ServerProfile:
    """The profile a conversation picked, when people may still use it; else the default one."""
    if profile_id:
        profile = user_profiles().filter(pk=profile_id).first()
        if profile is not None:
            return profile
    return find_profile(None)


async def needs_loading(profile: ServerProfile) -> bool:
    """Whether a request for a local profile will first have to wait for it to load."""
    if profile.is_remote:
        return False
    statuses = await router_status()
    return statuses.get(live_id(profile), {}).get("value") not in ("loaded", "sleeping")


async def record_queue_overflow(message: str, **details) -> None:
    """Put a request that left a fair queue without a slot on the dashboard's timeline."""
    await sync_to_async(timeline.record)(Event.Kind.QUEUE_OVERFLOW, message, level=Event.Level.WARNING, **details)

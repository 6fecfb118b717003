"""What ``monitor`` publishes for ``chat``: the one module chat may import from monitor.

Chat needs a serving slot for a profile (the one way to reach a model: ``serving_pool`` and its
``slot``; the pool's client only counts tokens, ``PromptCounter``), the profiles people may use, the
errors to tell them about, Redis clients and counters, waiting on work while it is alive, and a hook into the
dashboard (request figures). Nothing here reaches a model without the fair queue. Everything else of
monitor is private to it; ``make lint`` checks that.
"""

from __future__ import annotations

from monitor.awaiting import await_while_alive
from monitor.llama.errors import LlamaError, LlamaHung, LlamaRejected, LlamaStreamBroken, LlamaUnavailable
from monitor.models import ServerProfile
from monitor.nodes.registry import placements_of
from monitor.profiles.errors import LoadFailed, ProfileUnavailable
from monitor.profiles.selectors import find_profile, user_profiles
from monitor.redis_clients import REDIS_DOWN, LoopRedis, close_loop_clients, count_in_window
from monitor.redis_clients import sync_client as sync_redis
from monitor.serving.queue import Priority, QueueUnavailable
from monitor.serving.slot import PromptCounter, ServingPool, ServingSlot, serving_pool
from monitor.telemetry.dashboard import percentile, register_request_figures
from monitor.telemetry.prometheus import register_collector as register_metrics_collector

__all__ = [
    "REDIS_DOWN",
    "LlamaError",
    "LlamaHung",
    "LlamaRejected",
    "LlamaStreamBroken",
    "LlamaUnavailable",
    "LoadFailed",
    "LoopRedis",
    "Priority",
    "PromptCounter",
    "ProfileUnavailable",
    "QueueUnavailable",
    "ServerProfile",
    "ServingPool",
    "ServingSlot",
    "await_while_alive",
    "close_loop_clients",
    "count_in_window",
    "find_profile",
    "model_digests",
    "model_sha256",
    "percentile",
    "register_metrics_collector",
    "register_request_figures",
    "serving_pool",
    "sync_redis",
    "user_profiles",
]


def model_sha256(profile: ServerProfile) -> str:
    """The SHA256 of the profile's model file as a node serving it registered it ("": none knows it)."""
    return next(filter(None, model_digests(profile).values()), "")


def model_digests(profile: ServerProfile) -> dict[str, str]:
    """Each node the profile is placed on, and the SHA256 of the profile's model file as that node
    registered it ("": not known)."""
    return {
        placement.node.name: placement.node.registered_models.get(profile.model_file, "")
        for placement in placements_of(profile)
    }

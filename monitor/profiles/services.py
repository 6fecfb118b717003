"""Writes to server profiles: save (a new revision when launch options change), apply, clone, delete.

Views, the planner page and tasks call these; none of them writes a profile itself.
A profile that serves keeps serving while its new revision loads (see ``loading``);
one that does not serve simply uses its new settings at its next load.
"""

from __future__ import annotations

import logging

from asgiref.sync import async_to_sync
from django.conf import settings
from django.db import transaction
from django.utils.translation import gettext as _

from monitor.llama.errors import LlamaError
from monitor.models import Placement, ServerProfile
from monitor.nodes import readiness
from monitor.nodes.registry import nodes_serving, place_here, placement_here
from monitor.profiles.loading import reload_presets, unload_profile
from monitor.profiles.options import profile_options
from monitor.profiles.presets import current_options
from monitor.profiles.status import router_status, state_of
from monitor.profiles.validation import validate_profile

log = logging.getLogger(__name__)


class ProfileProtected(Exception):
    """The default profile cannot be deleted; ``str(error)`` is fit to show."""


def save_profile(profile: ServerProfile) -> bool:
    """Save a validated profile; a change of its launch options makes a new revision.

    Returns True when the launch options changed.
    """
    options = [list(option) for option in profile_options(profile)] if not profile.is_remote else []
    served = _served_options(profile)
    changed = options != served
    if changed and served:
        # A served id (``name@revision``) always means the same launch options: what was cached
        # about it (slots, context, in every process) stays true, and the old one can keep serving.
        profile.revision += 1
    profile.revision_options = options
    profile.save()
    if not profile.is_remote and not profile.placements.exists():
        place_here(profile)  # a new profile is served by this box's node until an admin places it elsewhere
    return changed


def _served_options(profile: ServerProfile) -> list[list]:
    """The options its current revision was (or would be) served with: those recorded, else, for a
    profile never saved here (the seeded ones), those its stored fields give."""
    if profile.revision_options or profile.pk is None or profile.is_remote:
        return profile.revision_options
    stored = ServerProfile.objects.filter(pk=profile.pk).first()
    if stored is None or stored.is_remote:
        return []
    return [list(option) for option in current_options(stored)]


def is_serving(profile: ServerProfile) -> bool:
    """Whether the profile (as stored) serves on this node; when llama-server is down nobody can tell,
    so it counts as serving and its live revision is kept."""
    try:
        statuses = async_to_sync(router_status)(fresh=True)
    except LlamaError:
        return True
    return state_of(profile, statuses, placement_here(profile)).state in ("loaded", "loading", "sleeping")


def _publish_presets() -> None:
    try:
        async_to_sync(reload_presets)()
    except LlamaError as error:
        # The presets file is written; the router reads it again when it (re)starts.
        log.warning("presets written, but llama-server did not reload them: %s", error)


def apply_here(profile: ServerProfile) -> bool:
    """A saved change, applied on this node. True when the profile serves here on an older revision:
    the new one must load beside it (the caller queues the load). Otherwise there is no live revision
    to protect: the presets are published and the next load uses the new settings."""
    profile = ServerProfile.objects.get(pk=profile.pk)
    placement = placement_here(profile)
    if profile.is_remote or placement is None:
        return False
    if placement.live_revision not in (None, profile.revision) and is_serving(profile):
        return True
    if placement.live_revision != profile.revision:
        Placement.objects.filter(pk=placement.pk).update(live_revision=None, live_options=[])
    _publish_presets()
    return False


def apply_plan(
    profile: ServerProfile,
    *,
    gpu_layers: int,
    ctx_size: int,
    parallel: int,
    cache_type_k: str,
    cache_type_v: str,
    cpu_moe_layers: int,
) -> bool:
    """Write a planner recommendation into a profile, validated and saved like any edit (the caller has
    every node that serves it apply the change). Returns whether its launch options changed. Raises
    ValidationError (nothing saved)."""
    profile.gpu_layers = str(gpu_layers)
    profile.ctx_size = ctx_size
    profile.parallel = parallel
    profile.cache_type_k = cache_type_k
    profile.cache_type_v = cache_type_v
    profile.n_cpu_moe = cpu_moe_layers
    validate_profile(profile)
    with transaction.atomic():
        return save_profile(profile)


def clone_profile(source: ServerProfile) -> ServerProfile:
    """A copy under the first free name ``<name>-copy[-N]``, not default, never loaded."""
    base = f"{source.name}-copy"
    name, n = base, 2
    while ServerProfile.objects.filter(name=name).exists():
        name, n = f"{base}-{n}", n + 1
    clone = ServerProfile.objects.get(pk=source.pk)
    clone.pk, clone.name, clone.is_default = None, name, False
    clone.revision, clone.revision_options = 1, []
    save_profile(clone)
    for placement in source.placements.all():
        Placement.objects.get_or_create(profile=clone, node=placement.node)
    return clone


def delete_profile(profile: ServerProfile) -> list[str]:
    """Delete a profile (the default one is refused: ProfileProtected); returns the nodes that served it,
    which the caller has unload it (by name). This node's instances are unloaded here at once."""
    if profile.is_default:
        raise ProfileProtected(
            _("%(name)s is the default profile; make another one the default first.") % {"name": profile.name}
        )
    nodes = [node.name for node in nodes_serving(profile)]
    withdraw(profile)
    if settings.NODE_NAME in nodes:
        try:
            async_to_sync(unload_profile)(profile.name)
        except LlamaError as error:
            log.warning("%s: not unloaded before its deletion: %s", profile.name, error)
    profile.delete()
    _publish_presets()
    return [name for name in nodes if name != settings.NODE_NAME]


def serves_anywhere(profile: ServerProfile) -> bool:
    """Whether some node serves the profile now (as their heartbeats say)."""
    names = [node.name for node in nodes_serving(profile)]
    return bool(names) and bool(async_to_sync(readiness.served_on)(names, profile.name))


def loads_where_placed(profile: ServerProfile, *, was_serving: bool) -> bool:
    """Whether a node the profile is newly placed on loads it at once: it was serving somewhere (its pool
    grows), or it is always loaded (the default profile, a load-on-start one)."""
    return was_serving or profile.is_default or profile.load_on_startup


def withdraw(profile: ServerProfile) -> None:
    """No new request goes to the profile on any node (its instances are about to be unloaded)."""
    for node in nodes_serving(profile):
        async_to_sync(readiness.mark_failed)(node.name, profile.name)

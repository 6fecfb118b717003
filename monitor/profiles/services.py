"""Writes to server profiles: save (a new revision when launch options change), apply, clone, delete, unload.

Views, the planner page and tasks call these; none of them writes a profile itself.
A profile that serves keeps serving while its new revision loads (see ``loading``);
one that does not serve simply uses its new settings at its next load.
"""

from __future__ import annotations

import logging

from asgiref.sync import async_to_sync
from django.db import transaction
from django.utils.translation import gettext as _

from monitor.llama.errors import LlamaError
from monitor.models import ServerProfile
from monitor.profiles.loading import reload_presets, unload_profile
from monitor.profiles.options import profile_options
from monitor.profiles.presets import current_options, write_preset
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
    if not profile.is_remote:
        write_preset()
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
    """Whether the profile (as stored) serves; when llama-server is down nobody can tell,
    so it counts as serving and its live revision is kept."""
    try:
        statuses = async_to_sync(router_status)(fresh=True)
    except LlamaError:
        return True
    return state_of(profile, statuses).state in ("loaded", "loading", "sleeping")


def _publish_presets() -> None:
    try:
        async_to_sync(reload_presets)()
    except LlamaError as error:
        # The presets file is written; the router reads it again when it (re)starts.
        log.warning("presets written, but llama-server did not reload them: %s", error)


def save_and_apply(profile: ServerProfile) -> bool:
    """Save an edited, validated profile and apply the change.

    Returns True when the profile serves and its launch options changed: the caller
    then queues the load of the new revision, beside the live one. Otherwise there is
    no old revision to protect, and the next load uses the new settings.
    """
    stored = ServerProfile.objects.filter(pk=profile.pk).first() if profile.pk else None
    was_serving = stored is not None and is_serving(stored)
    with transaction.atomic():
        changed = save_profile(profile)
    if was_serving and changed:
        return True
    if not was_serving:
        ServerProfile.objects.filter(pk=profile.pk).update(live_revision=None, live_options=[])
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
    """Write a planner recommendation into a profile, validated and applied like any edit.

    Returns what ``save_and_apply`` returns. Raises ValidationError (nothing saved).
    """
    profile.gpu_layers = str(gpu_layers)
    profile.ctx_size = ctx_size
    profile.parallel = parallel
    profile.cache_type_k = cache_type_k
    profile.cache_type_v = cache_type_v
    profile.n_cpu_moe = cpu_moe_layers
    validate_profile(profile)
    return save_and_apply(profile)


def clone_profile(source: ServerProfile) -> ServerProfile:
    """A copy under the first free name ``<name>-copy[-N]``, not default, never loaded."""
    base = f"{source.name}-copy"
    name, n = base, 2
    while ServerProfile.objects.filter(name=name).exists():
        name, n = f"{base}-{n}", n + 1
    clone = ServerProfile.objects.get(pk=source.pk)
    clone.pk, clone.name, clone.is_default = None, name, False
    clone.revision, clone.revision_options, clone.live_revision, clone.live_options = 1, [], None, []
    save_profile(clone)
    return clone


def delete_profile(profile: ServerProfile) -> None:
    """Unload and delete a profile; the default one is refused (ProfileProtected)."""
    if profile.is_default:
        raise ProfileProtected(
            _("%(name)s is the default profile; make another one the default first.") % {"name": profile.name}
        )
    if not profile.is_remote:
        try:
            async_to_sync(unload_profile)(profile)
        except LlamaError as error:
            log.warning("%s: not unloaded before its deletion: %s", profile.name, error)
    profile.delete()
    _publish_presets()


def unload(profile: ServerProfile) -> None:
    """Unload every served revision of a profile now; raises LlamaError when the router cannot."""
    async_to_sync(unload_profile)(profile)

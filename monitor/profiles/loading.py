"""Loading, unloading and changing server profiles in llama-server's router, safely.

A profile's launch options are served as ``<name>@<revision>``. Loading a new revision
happens beside the live one (the router is started with one instance to spare); only
when the new one answers does it become live and the old one go. When it fails, the
live revision keeps serving and the admin gets llama-server's own words for why.
"""

from __future__ import annotations

import asyncio
import time

from asgiref.sync import sync_to_async
from django.conf import settings
from django.utils.translation import gettext as _

from monitor import timeline
from monitor.llama.client import LlamaClient, local_client
from monitor.llama.errors import LlamaError, LlamaRejected
from monitor.llama.logs import instance_log_tail
from monitor.models import Event, Placement, ServerProfile
from monitor.nodes import readiness
from monitor.nodes.registry import placement_here
from monitor.profiles.errors import LoadFailed
from monitor.profiles.presets import current_options, live_id, parse_served_id, served_id, write_preset
from monitor.profiles.selectors import startup_placements
from monitor.profiles.status import forget_status, router_status

POLL_S = 0.05


async def _wait_for(client: LlamaClient, model_id: str, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = (await router_status(client, fresh=True)).get(model_id)
        if status is None:
            raise LoadFailed(_("llama-server does not know %(id)s.") % {"id": model_id})
        value = status.get("value")
        if value in ("loaded", "sleeping"):
            return status
        if value == "unloaded" and (status.get("failed") or time.monotonic() > deadline - timeout + 2):
            return status  # failed, or never started (the router refused it)
        await asyncio.sleep(POLL_S)
    raise LoadFailed(_("%(id)s did not load within %(s)d s.") % {"id": model_id, "s": timeout})


async def wait_gone(client: LlamaClient, model_id: str, timeout_s: float = 30.0) -> bool:
    """Until the router no longer counts ``model_id`` as running: True once it says so, False if it has not
    within ``timeout_s``. Its unload only asks the instance to stop and a kill is seen when the child
    exits: until then its status still says "loaded", and a load asked meanwhile would skip it and send
    requests to an instance on its way out. A router that does not answer (frozen, restarting) says
    nothing of the instance: it is asked again (seen: a frozen router's instance killed, a load skipped
    as the router, let go, still called the dead instance loaded, and the node left its pool for good)."""
    deadline = time.monotonic() + timeout_s
    while (left := deadline - time.monotonic()) > 0:
        try:
            async with asyncio.timeout(left):
                statuses = await router_status(client, fresh=True)
        except (LlamaError, TimeoutError):
            statuses = {model_id: {"value": "unknown"}}
        if statuses.get(model_id, {}).get("value") not in ("loaded", "sleeping", "loading", "unknown"):
            return True
        await asyncio.sleep(POLL_S)
    return False


async def _unload(client: LlamaClient, model_id: str) -> None:
    await client.unload_model(model_id)
    await wait_gone(client, model_id)


def _failure(model_id: str, status: dict) -> LoadFailed:
    tail = instance_log_tail(model_id)
    errors = [line for line in tail if " E " in line or "error" in line.lower()]
    reason = errors[-1].split("] ", 1)[-1] if errors else ""
    exit_code = status.get("exit_code")
    message = _("%(id)s failed to load (exit code %(code)s).") % {"id": model_id, "code": exit_code}
    if reason:
        message += " " + reason
    return LoadFailed(message, log_tail=tail, exit_code=exit_code)


async def _load(client: LlamaClient, model_id: str) -> float:
    """Load one served id and wait; returns the seconds it took. Raises LoadFailed."""
    started = time.monotonic()
    status = (await router_status(client, fresh=True)).get(model_id, {})
    if status.get("value") not in ("loaded", "sleeping", "loading"):
        try:
            await client.load_model(model_id)
        except LlamaRejected as error:
            # Someone else asked first (a second click, two chats, the watchdog): wait for that load.
            again = (await router_status(client, fresh=True)).get(model_id, {})
            if again.get("value") not in ("loaded", "sleeping", "loading"):
                raise LoadFailed(str(error)) from error
    status = await _wait_for(client, model_id, settings.PROFILE_LOAD_TIMEOUT_S)
    if status.get("value") not in ("loaded", "sleeping"):
        raise _failure(model_id, status)
    return time.monotonic() - started


@sync_to_async
def _here(profile: ServerProfile) -> tuple[ServerProfile, Placement]:
    """The profile as stored, and its placement on this node (LoadFailed: it is not served here)."""
    profile = ServerProfile.objects.get(pk=profile.pk)
    placement = placement_here(profile)
    if placement is None:
        raise LoadFailed(
            _("%(name)s is not served by this node (%(node)s).") % {"name": profile.name, "node": settings.NODE_NAME}
        )
    return profile, placement


@sync_to_async
def _promote(profile: ServerProfile, placement: Placement) -> None:
    """The loaded revision goes live on this node (unless a later save made another revision current meanwhile)."""
    options = [list(option) for option in current_options(profile)]
    Placement.objects.filter(pk=placement.pk, profile__revision=profile.revision).update(
        live_revision=profile.revision, live_options=options, error=""
    )


record = sync_to_async(timeline.record)
publish_preset = sync_to_async(write_preset)


async def _record_loaded(profile: ServerProfile, seconds: float, **details) -> None:
    message = _("%(name)s loaded on %(node)s in %(s).1f s.") % {
        "name": profile.name,
        "node": settings.NODE_NAME,
        "s": seconds,
    }
    await record(
        Event.Kind.PROFILE_LOADED, message, profile=profile.name, node=settings.NODE_NAME, load_s=round(seconds, 3),
        **details,
    )  # fmt: skip


async def _load_placed(client: LlamaClient, profile: ServerProfile, placement: Placement, model_id: str) -> float:
    """``_load`` of the profile's id on this node; on failure records why on its placement and in the
    timeline (the live revision, if any, keeps serving) and raises LoadFailed."""
    try:
        return await _load(client, model_id)
    except LoadFailed as error:
        await Placement.objects.filter(pk=placement.pk).aupdate(error=str(error)[:2000])
        await record(
            Event.Kind.PROFILE_FAILED, str(error), level=Event.Level.ERROR, profile=profile.name,
            node=settings.NODE_NAME, log_tail=error.log_tail[-20:], exit_code=error.exit_code,
        )  # fmt: skip
        raise


async def reload_presets(client: LlamaClient | None = None) -> None:
    """Write the presets from the profiles and have the router read them again."""
    await publish_preset()
    await (client or local_client()).list_models(reload=True)
    forget_status()


async def load_profile(profile: ServerProfile, client: LlamaClient | None = None) -> float:
    """Load the profile's saved settings beside whatever serves now; on success they go live.

    Returns the load time. On failure records why and raises LoadFailed; the live
    revision (if any) keeps serving.
    """
    client = client or local_client()
    profile, placement = await _here(profile)
    target = served_id(profile.name, profile.revision)
    await reload_presets(client)
    seconds = await _load_placed(client, profile, placement, target)
    if placement.live_revision != profile.revision:
        old = live_id(profile, placement) if placement.live_revision else None
        await _promote(profile, placement)  # new requests go to the new revision from now on
        await _announce(client, profile.name, target)
        if old:
            await _wait_idle(client, old, settings.PROFILE_DRAIN_S)
        await reload_presets(client)  # the old revision's section is gone: the router unloads it
    await trim(client, keep=target)
    await _record_loaded(profile, seconds, revision=profile.revision)
    forget_status()
    return seconds


async def _announce(client: LlamaClient, pool: str, model: str) -> None:
    """The fair queue sends this node's requests for ``pool`` to ``model`` from now on (its heartbeat
    would say so within a beat; a change going live should not wait for it)."""
    props = await client.get_json("/props", params={"model": model})
    await readiness.mark_ready(settings.NODE_NAME, pool, int(props.get("total_slots") or 1), model)


async def ensure_serving(profile: ServerProfile, client: LlamaClient | None = None) -> str:
    """Make sure the profile's live revision on this node is loaded (loading it if needed); returns its id."""
    if profile.is_remote:
        return profile.remote_model
    client = client or local_client()
    profile, placement = await _here(profile)
    model_id = live_id(profile, placement)
    # Asked afresh: the caller found it not serving (a moment-old status may still say "loaded" of an
    # instance that has just died).
    status = (await router_status(client, fresh=True)).get(model_id, {})
    if status.get("value") in ("loaded", "sleeping"):
        return model_id
    if placement.live_revision is None:
        await load_profile(profile, client)
        return live_id(*await _here(profile))
    seconds = await _load_placed(client, profile, placement, model_id)
    await trim(client, keep=model_id)
    await _record_loaded(profile, seconds)
    return model_id


async def unload_profile(name: str, client: LlamaClient | None = None) -> None:
    """Unload every served revision of the profile named ``name`` on this node."""
    client = client or local_client()
    await readiness.mark_failed(settings.NODE_NAME, name)  # no more requests sent there
    statuses = await router_status(client, fresh=True)
    for model_id, status in statuses.items():
        parsed = parse_served_id(model_id)
        if parsed and parsed[0] == name and status.get("value") in ("loaded", "loading", "sleeping"):
            await _unload(client, model_id)
    forget_status()
    message = _("%(name)s unloaded on %(node)s.") % {"name": name, "node": settings.NODE_NAME}
    await record(Event.Kind.PROFILE_UNLOADED, message, profile=name, node=settings.NODE_NAME)


def _is_chat(model_id: str, embedders: frozenset[str]) -> bool:
    """Whether a served id is a chat profile's (an id of no profile, e.g. a deleted one's, counts as chat)."""
    parsed = parse_served_id(model_id)
    return parsed is None or parsed[0] not in embedders


async def trim(client: LlamaClient, *, keep: str) -> list[str]:
    """Unload instances beyond the limit of ``keep``'s kind, keeping ``keep``; returns what was unloaded.

    Chat profiles count against LLAMA_MODELS_MAX, embeddings and reranking profiles against
    LLAMA_EMBED_MODELS_MAX: a document's indexing never unloads the chat, nor a chat the embedder."""
    statuses = await router_status(client, fresh=True)
    embedder_names = ServerProfile.objects.exclude(kind=ServerProfile.Kind.CHAT).values_list("name", flat=True)
    embedders = frozenset([name async for name in embedder_names])
    chat = _is_chat(keep, embedders)
    limit = settings.LLAMA_MODELS_MAX if chat else settings.LLAMA_EMBED_MODELS_MAX
    loaded = [model_id for model_id, status in statuses.items() if status.get("value") in ("loaded", "sleeping")]
    extra = [model_id for model_id in loaded if model_id != keep and _is_chat(model_id, embedders) == chat]
    unloaded = []
    while len(extra) + 1 > limit and extra:
        model_id = extra.pop(0)
        if await _busy(client, model_id):
            continue  # answering someone: left loaded, for the next load's trim
        parsed = parse_served_id(model_id)
        if parsed:
            await readiness.withdraw(settings.NODE_NAME, parsed[0], model_id)
        await _unload(client, model_id)
        unloaded.append(model_id)
    forget_status()
    return unloaded


async def _busy(client: LlamaClient, model_id: str) -> bool:
    try:
        slots = await client.get_json("/slots", params={"model": model_id})
    except LlamaError:
        return False
    return any(slot.get("is_processing") for slot in slots if isinstance(slot, dict))


async def _wait_idle(client: LlamaClient, model_id: str, timeout: float) -> None:
    """Let the answers an instance is writing finish before it goes (at most ``timeout``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and await _busy(client, model_id):
        await asyncio.sleep(0.2)


async def load_startup_profiles(client: LlamaClient | None = None) -> list[str]:
    """Load every startup profile (their live revisions); returns what failed, with why."""
    failures = []
    for placement in await sync_to_async(startup_placements)():
        try:
            await ensure_serving(placement.profile, client)
        except LlamaError as error:
            failures.append(f"{placement.profile.name}: {error}")
    return failures

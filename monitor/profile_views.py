"""Staff pages for server profiles: list with live status, create, edit, clone, delete, load, unload."""

from __future__ import annotations

from asgiref.sync import async_to_sync
from django.contrib import messages as flash
from django.db import transaction
from django.http import JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from monitor import downloads, tasks
from monitor.forms import ServerProfileForm
from monitor.gguf_registry import scan_models
from monitor.llama_client import LlamaError
from monitor.models import Event, ServerProfile
from monitor.presets import live_id, served_id
from monitor.profiles import command_line
from monitor.router_log import instance_log_tail
from monitor.switching import reload_presets, router_status, save_profile, state_of, unload_profile
from monitor.views import staff_only


def _back(request, profile: ServerProfile):
    if request.POST.get("back") == "detail":
        return redirect("monitor:profile", profile_id=profile.pk)
    return redirect("monitor:profiles")


def _model_names() -> list[str]:
    models, _skipped = scan_models(downloads.models_dir())
    return [model.path.name for model in models]


def _statuses() -> tuple[dict[str, dict], str]:
    try:
        return async_to_sync(router_status)(fresh=True), ""
    except LlamaError as error:
        return {}, str(error)


def state_labels() -> dict[str, str]:
    return {
        "loaded": _("loaded"),
        "loading": _("loading"),
        "sleeping": _("sleeping"),
        "unloaded": _("unloaded"),
        "failed": _("failed"),
        "remote": _("remote"),
        "down": _("llama-server down"),
    }


def profile_payload(profile: ServerProfile, statuses: dict[str, dict], *, with_log: bool = False) -> dict:
    state = state_of(profile, statuses) if statuses or profile.is_remote else None
    last = Event.objects.filter(profile=profile.name).first()
    payload = {
        "id": profile.pk,
        "name": profile.name,
        "state": state.state if state else "down",
        "state_label": state_labels()[state.state if state else "down"],
        "served_id": state.served_id if state else live_id(profile),
        "pending": bool(state and state.pending_revision),
        "revision": profile.revision,
        "live_revision": profile.live_revision,
        "last_event": {"kind": last.kind, "level": last.level, "message": last.message, "at": last.created_at}
        if last
        else None,
    }
    if with_log and not profile.is_remote:
        current = served_id(profile.name, profile.revision)
        payload["log_tail"] = instance_log_tail(current) or instance_log_tail(live_id(profile))
    return payload


@staff_only
@require_GET
def profile_list(request):
    statuses, down = _statuses()
    profiles = list(ServerProfile.objects.all())
    rows = [(profile, profile_payload(profile, statuses)) for profile in profiles]
    return render(request, "monitor/profiles.html", {"rows": rows, "down": down})


@staff_only
@require_GET
def profile_status(request):
    statuses, down = _statuses()
    wanted = request.GET.get("log")
    data = [
        profile_payload(profile, statuses, with_log=str(profile.pk) == wanted)
        for profile in ServerProfile.objects.all()
    ]
    return JsonResponse({"profiles": data, "down": down})


@staff_only
@require_GET
def profile_detail(request, profile_id: int):
    profile = get_object_or_404(ServerProfile, pk=profile_id)
    statuses, down = _statuses()
    return render(
        request,
        "monitor/profile_detail.html",
        {
            "profile": profile,
            "status": profile_payload(profile, statuses, with_log=True),
            "down": down,
            "command_line": "" if profile.is_remote else command_line(profile),
            "events": Event.objects.filter(profile=profile.name)[:20],
        },
    )


def _apply(request, profile: ServerProfile, *, was_serving: bool, changed: bool) -> None:
    """After a save: a serving profile loads its new revision beside the old one."""
    if was_serving and changed:
        tasks.load_profile.delay(profile.pk)
        flash.info(
            request,
            _("Saved. %(name)s is loading its new settings; the old ones serve until then.") % {"name": profile.name},
        )
    else:
        if not was_serving:
            # Nothing of it serves, so there is no old revision to protect: the next load uses the new settings.
            ServerProfile.objects.filter(pk=profile.pk).update(live_revision=None, live_options=[])
        try:
            async_to_sync(reload_presets)()
        except LlamaError:
            pass  # the router reads the presets when it starts
        flash.success(request, _("Saved."))


def _is_serving(profile: ServerProfile) -> bool:
    """Whether the profile (as stored, before this edit) serves; when llama-server is down nobody can
    tell, so its live revision is kept as if it did."""
    statuses, down = _statuses()
    if down:
        return True
    state = state_of(profile, statuses)
    return state.state in ("loaded", "loading", "sleeping")


@staff_only
@require_http_methods(["GET", "POST"])
def profile_edit(request, profile_id: int | None = None):
    profile = get_object_or_404(ServerProfile, pk=profile_id) if profile_id else ServerProfile()
    form = ServerProfileForm(request.POST or None, instance=profile, model_names=_model_names())
    stored = ServerProfile.objects.get(pk=profile.pk) if profile.pk else None
    if request.method == "POST" and form.is_valid():
        was_serving = stored is not None and _is_serving(stored)
        with transaction.atomic():
            changed = save_profile(form.save(commit=False))
        _apply(request, profile, was_serving=was_serving, changed=changed)
        return redirect("monitor:profile", profile_id=profile.pk)
    return render(request, "monitor/profile_form.html", {"form": form, "profile": profile})


@staff_only
@require_POST
def profile_clone(request, profile_id: int):
    source = get_object_or_404(ServerProfile, pk=profile_id)
    base = f"{source.name}-copy"
    name, n = base, 2
    while ServerProfile.objects.filter(name=name).exists():
        name, n = f"{base}-{n}", n + 1
    clone = ServerProfile.objects.get(pk=source.pk)
    clone.pk, clone.name, clone.is_default = None, name, False
    clone.revision, clone.revision_options, clone.live_revision, clone.live_options = 1, [], None, []
    save_profile(clone)
    flash.success(request, _("Cloned as %(name)s.") % {"name": name})
    return redirect("monitor:profile-edit", profile_id=clone.pk)


@staff_only
@require_http_methods(["GET", "POST"])
def profile_delete(request, profile_id: int):
    profile = get_object_or_404(ServerProfile, pk=profile_id)
    if request.method == "GET":
        return render(request, "monitor/profile_delete.html", {"profile": profile})
    if profile.is_default:
        flash.error(
            request, _("%(name)s is the default profile; make another one the default first.") % {"name": profile.name}
        )
        return redirect("monitor:profile", profile_id=profile.pk)
    try:
        if not profile.is_remote:
            async_to_sync(unload_profile)(profile)
    except LlamaError:
        pass
    name = profile.name
    profile.delete()
    try:
        async_to_sync(reload_presets)()
    except LlamaError:
        pass
    flash.success(request, _("Deleted %(name)s.") % {"name": name})
    return redirect("monitor:profiles")


@staff_only
@require_POST
def profile_load(request, profile_id: int):
    profile = get_object_or_404(ServerProfile, pk=profile_id)
    tasks.load_profile.delay(profile.pk)
    flash.info(request, _("Loading %(name)s…") % {"name": profile.name})
    return _back(request, profile)


@staff_only
@require_POST
def profile_unload(request, profile_id: int):
    profile = get_object_or_404(ServerProfile, pk=profile_id)
    try:
        async_to_sync(unload_profile)(profile)
        flash.success(request, _("Unloaded %(name)s.") % {"name": profile.name})
    except LlamaError as error:
        flash.error(request, str(error))
    return _back(request, profile)

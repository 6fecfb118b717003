"""Staff pages for server profiles: list with live status, create, edit, clone, delete, load, unload."""

from __future__ import annotations

from django.contrib import messages as flash
from django.db import transaction
from django.http import Http404, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from monitor import tasks
from monitor.catalog import download_jobs
from monitor.catalog.registry import scan_models
from monitor.models import Event, ServerProfile
from monitor.nodes import model_files
from monitor.nodes.registry import node_queue
from monitor.profiles import overview, services
from monitor.profiles.options import command_line
from monitor.web.access import staff_only
from monitor.web.forms import ServerProfileForm


def _back(request, profile: ServerProfile):
    if request.POST.get("back") == "detail":
        return redirect("monitor:profile", profile_id=profile.pk)
    return redirect("monitor:profiles")


def _model_names() -> list[str]:
    models, _skipped = scan_models(download_jobs.models_dir())
    return [model.path.name for model in models]


def _down(statuses: overview.NodeStatuses) -> str:
    """The nodes whose router did not answer, and why ("" when every one did)."""
    return "; ".join(f"{name}: {why}" for name, (_statuses, why) in statuses.items() if why)


# Session: the loads and unloads this admin started (profile id -> action), followed by their pages.
STARTED_ACTIONS = "profile_actions"


def start_on_nodes(request, profile: ServerProfile, task, follow: str | None = None) -> list[str]:
    """Send ``task`` for the profile to the nodes that serve it (``tasks.on_nodes``); their names. With
    ``follow`` ("load", "unload") this admin's pages follow it until it ends (profiles.js); its moment is
    taken before the tasks go, so a fast node's event is never older than it."""
    action = overview.started_action(follow) if follow else None
    names = tasks.on_nodes(task, profile)
    if action and names:
        started = overview.current_actions(request.session.get(STARTED_ACTIONS, {}))
        started[str(profile.pk)] = action
        request.session[STARTED_ACTIONS] = started
    return names


def _in_motion(request, payloads: list[dict]) -> bool:
    return overview.in_motion(payloads, request.session.get(STARTED_ACTIONS, {}))


@staff_only
@require_GET
def profile_list(request):
    statuses = overview.router_statuses()
    profiles = list(ServerProfile.objects.all())
    payloads = [overview.profile_payload(profile, statuses) for profile in profiles]
    context = {
        "rows": list(zip(profiles, payloads, strict=True)),
        "down": _down(statuses),
        "in_motion": _in_motion(request, payloads),
    }
    return render(request, "monitor/profiles.html", context)


@staff_only
@require_GET
def profile_status(request):
    """What profiles.js asks for while something is in motion: every profile, or the one ?profile= (its
    page, with its log). The routers' answers may be a moment old, so tabs polling cost them little."""
    statuses = overview.router_statuses(max_age_s=overview.POLL_STATUS_AGE_S)
    wanted = request.GET.get("profile", "")
    if wanted and not wanted.isdigit():
        raise Http404(wanted[:20])
    profiles = ServerProfile.objects.filter(pk=wanted) if wanted else ServerProfile.objects.all()
    payloads = [overview.profile_payload(profile, statuses, with_log=bool(wanted)) for profile in profiles]
    return JsonResponse({"profiles": payloads, "down": _down(statuses), "in_motion": _in_motion(request, payloads)})


@staff_only
@require_GET
def profile_detail(request, profile_id: int):
    profile = get_object_or_404(ServerProfile, pk=profile_id)
    statuses = overview.router_statuses()
    down = _down(statuses)
    status = overview.profile_payload(profile, statuses, with_log=True)
    return render(
        request,
        "monitor/profile_detail.html",
        {
            "profile": profile,
            "status": status,
            "in_motion": _in_motion(request, [status]),
            "down": down,
            "command_line": "" if profile.is_remote else command_line(profile),
            "events": Event.objects.filter(profile=profile.name)[:20],
            "node_files": model_files.profile_files(profile),
        },
    )


@staff_only
@require_http_methods(["GET", "POST"])
def profile_edit(request, profile_id: int | None = None):
    profile = get_object_or_404(ServerProfile, pk=profile_id) if profile_id else ServerProfile()
    form = ServerProfileForm(request.POST or None, instance=profile, model_names=_model_names())
    if request.method == "POST" and form.is_valid():
        profile = form.save(commit=False)
        serving = bool(profile.pk) and services.serves_anywhere(profile)
        before = set(profile.placements.values_list("node_id", flat=True)) if profile.pk else set()
        with transaction.atomic():
            changed = services.save_profile(profile)
            left, joined = form.save_placements(profile, before)
        for node in left:  # the nodes it no longer serves on unload it
            tasks.unload_profile.apply_async((profile.name,), queue=node_queue(node.name))
        loads = changed and serving  # its new revision loads where it serves
        # The nodes it joined load it, when it serves elsewhere or is always loaded (after their apply).
        placed = joined if services.loads_where_placed(profile, was_serving=serving) else []
        started = start_on_nodes(request, profile, tasks.apply_profile, "load" if loads or placed else None)
        tasks.load_on(profile, [node.name for node in placed])
        if started and loads:
            flash.info(request, loading_new_settings_message(profile))
        elif not placed:
            flash.success(request, _("Saved."))
        if placed:
            flash.info(request, placed_message(profile, placed))
        return redirect("monitor:profile", profile_id=profile.pk)
    return render(request, "monitor/profile_form.html", {"form": form, "profile": profile})


def placed_message(profile: ServerProfile, nodes: list) -> str:
    return _("%(name)s loads on %(nodes)s, where it is newly placed.") % {
        "name": profile.name,
        "nodes": ", ".join(node.name for node in nodes),
    }


def loading_new_settings_message(profile: ServerProfile) -> str:
    return _("Saved. Where %(name)s serves, each node loads its new settings; the old ones serve there until then.") % {
        "name": profile.name
    }


@staff_only
@require_POST
def profile_clone(request, profile_id: int):
    clone = services.clone_profile(get_object_or_404(ServerProfile, pk=profile_id))
    flash.success(request, _("Cloned as %(name)s.") % {"name": clone.name})
    return redirect("monitor:profile-edit", profile_id=clone.pk)


@staff_only
@require_http_methods(["GET", "POST"])
def profile_delete(request, profile_id: int):
    profile = get_object_or_404(ServerProfile, pk=profile_id)
    if request.method == "GET":
        return render(request, "monitor/profile_delete.html", {"profile": profile})
    try:
        for node in services.delete_profile(profile):
            tasks.unload_profile.apply_async((profile.name,), queue=node_queue(node))
    except services.ProfileProtected as error:
        flash.error(request, str(error))
        return redirect("monitor:profile", profile_id=profile.pk)
    flash.success(request, _("Deleted %(name)s.") % {"name": profile.name})
    return redirect("monitor:profiles")


@staff_only
@require_POST
def profile_load(request, profile_id: int):
    profile = get_object_or_404(ServerProfile, pk=profile_id)
    start_on_nodes(request, profile, tasks.load_profile, "load")
    flash.info(request, _("Loading %(name)s…") % {"name": profile.name})
    return _back(request, profile)


@staff_only
@require_POST
def profile_unload(request, profile_id: int):
    profile = get_object_or_404(ServerProfile, pk=profile_id)
    services.withdraw(profile)  # no new request goes to it from now on
    start_on_nodes(request, profile, tasks.unload_profile, "unload")
    flash.success(request, _("Unloading %(name)s…") % {"name": profile.name})
    return _back(request, profile)

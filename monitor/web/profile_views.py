"""Staff pages for server profiles: list with live status, create, edit, clone, delete, load, unload."""

from __future__ import annotations

from django.contrib import messages as flash
from django.http import JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from monitor import tasks
from monitor.catalog import downloads
from monitor.catalog.registry import scan_models
from monitor.llama.errors import LlamaError
from monitor.models import Event, ServerProfile
from monitor.profiles import overview, services
from monitor.profiles.options import command_line
from monitor.web.access import staff_only
from monitor.web.forms import ServerProfileForm


def _back(request, profile: ServerProfile):
    if request.POST.get("back") == "detail":
        return redirect("monitor:profile", profile_id=profile.pk)
    return redirect("monitor:profiles")


def _model_names() -> list[str]:
    models, _skipped = scan_models(downloads.models_dir())
    return [model.path.name for model in models]


@staff_only
@require_GET
def profile_list(request):
    statuses, down = overview.router_statuses()
    profiles = list(ServerProfile.objects.all())
    rows = [(profile, overview.profile_payload(profile, statuses)) for profile in profiles]
    return render(request, "monitor/profiles.html", {"rows": rows, "down": down})


@staff_only
@require_GET
def profile_status(request):
    statuses, down = overview.router_statuses()
    wanted = request.GET.get("log")
    data = [
        overview.profile_payload(profile, statuses, with_log=str(profile.pk) == wanted)
        for profile in ServerProfile.objects.all()
    ]
    return JsonResponse({"profiles": data, "down": down})


@staff_only
@require_GET
def profile_detail(request, profile_id: int):
    profile = get_object_or_404(ServerProfile, pk=profile_id)
    statuses, down = overview.router_statuses()
    return render(
        request,
        "monitor/profile_detail.html",
        {
            "profile": profile,
            "status": overview.profile_payload(profile, statuses, with_log=True),
            "down": down,
            "command_line": "" if profile.is_remote else command_line(profile),
            "events": Event.objects.filter(profile=profile.name)[:20],
        },
    )


@staff_only
@require_http_methods(["GET", "POST"])
def profile_edit(request, profile_id: int | None = None):
    profile = get_object_or_404(ServerProfile, pk=profile_id) if profile_id else ServerProfile()
    form = ServerProfileForm(request.POST or None, instance=profile, model_names=_model_names())
    if request.method == "POST" and form.is_valid():
        profile = form.save(commit=False)
        if services.save_and_apply(profile):
            tasks.load_profile.delay(profile.pk)
            flash.info(request, loading_new_settings_message(profile))
        else:
            flash.success(request, _("Saved."))
        return redirect("monitor:profile", profile_id=profile.pk)
    return render(request, "monitor/profile_form.html", {"form": form, "profile": profile})


def loading_new_settings_message(profile: ServerProfile) -> str:
    return _("Saved. %(name)s is loading its new settings; the old ones serve until then.") % {"name": profile.name}


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
        services.delete_profile(profile)
    except services.ProfileProtected as error:
        flash.error(request, str(error))
        return redirect("monitor:profile", profile_id=profile.pk)
    flash.success(request, _("Deleted %(name)s.") % {"name": profile.name})
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
        services.unload(profile)
        flash.success(request, _("Unloaded %(name)s.") % {"name": profile.name})
    except LlamaError as error:
        flash.error(request, str(error))
    return _back(request, profile)

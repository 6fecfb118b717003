"""Staff pages for models: the registry, downloads with live progress, the VRAM planner."""

from __future__ import annotations

import psutil
from django.contrib import messages as flash
from django.core.exceptions import ValidationError
from django.http import JsonResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from monitor import downloads
from monitor.forms import DownloadForm, PlannerForm
from monitor.gguf_registry import scan_models
from monitor.gpu import detect_gpus
from monitor.models import DownloadJob, ServerProfile
from monitor.planner import GIB, MIB, plan, recommend
from monitor.profiles import apply_plan


def staff_only(view):
    """Staff pages answer 403 to everyone else (logged in or not), never a redirect to a login form."""

    def wrapped(request, *args, **kwargs):
        if not (request.user.is_authenticated and request.user.is_staff):
            return render(request, "monitor/forbidden.html", status=403)
        return view(request, *args, **kwargs)

    wrapped.__name__ = view.__name__
    return wrapped


def job_payload(job: DownloadJob) -> dict:
    return {
        "id": job.id,
        "name": job.file_name,
        "parts": len(job.parts),
        "status": job.status,
        "status_label": job.get_status_display(),
        "error": job.error,
        "bytes_done": job.bytes_done,
        "bytes_total": job.bytes_total or sum(p.get("size") or 0 for p in job.parts) or None,
        "rate_bps": job.rate_bps,
        "eta_s": job.eta_seconds,
    }


@staff_only
@require_GET
def models_page(request):
    models, skipped = scan_models(downloads.models_dir())
    jobs = [job_payload(job) for job in DownloadJob.objects.all()[:50]]
    return render(
        request,
        "monitor/models.html",
        {"models": models, "skipped": skipped, "form": DownloadForm(), "jobs": jobs},
    )


@staff_only
@require_POST
def start_download(request):
    from monitor.tasks import download_model

    form = DownloadForm(request.POST)
    if not form.is_valid():
        for errors in form.errors.values():
            flash.error(request, " ".join(errors))
        return redirect("monitor:models")
    try:
        job = downloads.create_job(request.user, form.cleaned_data["url"], form.cleaned_data["sha256"])
    except downloads.DownloadError as error:
        flash.error(request, str(error))
    else:
        download_model.delay(job.id)
        flash.success(request, _("Download of %(name)s started.") % {"name": job.file_name})
    return redirect("monitor:models")


@staff_only
@require_POST
def cancel_download(request, job_id):
    downloads.cancel_job(job_id)
    return redirect("monitor:models")


@staff_only
@require_POST
def resume_download(request, job_id):
    from monitor.tasks import download_model

    job = downloads.restart_job(job_id)
    if job.status == DownloadJob.Status.QUEUED:
        download_model.delay(job.id)
    return redirect("monitor:models")


@staff_only
@require_GET
def downloads_json(request):
    return JsonResponse({"jobs": [job_payload(job) for job in DownloadJob.objects.all()[:50]]})


@staff_only
@require_GET
def planner_page(request):
    models, _skipped = scan_models(downloads.models_dir())
    by_name = {m.path.name: m for m in models}
    gpus, gpu_problem = detect_gpus()
    initial = {"free_vram_gib": round(gpus[0].free_bytes / GIB, 2)} if gpus else {}
    form = PlannerForm(request.GET or None, model_names=list(by_name), initial=initial)
    context = {
        "form": form,
        "gpus": gpus,
        "gpu_problem": gpu_problem,
        "MIB": MIB,
        "profiles": ServerProfile.objects.all(),
    }
    if form.is_bound and form.is_valid():
        model = by_name[form.cleaned_data["model"]]
        request_ = form.plan_request()
        result = plan(model, request_)
        advice = recommend(model, request_, form.free_vram, form.margin)
        budget = max(form.free_vram - form.margin, 1)
        ram_available = psutil.virtual_memory().available
        context.update(
            model=model,
            plan=result,
            advice=advice,
            fits=result.vram <= form.free_vram - form.margin,
            ram_available=ram_available,
            fits_ram=result.ram <= ram_available,
            bar={
                "weights": min(100, result.weights_gpu * 100 / budget),
                "kv": min(100, result.kv_gpu * 100 / budget),
                "compute": min(100, (result.compute_gpu + result.runtime_gpu) * 100 / budget),
            },
            flags=_flags(advice, request_),
        )
    return render(request, "monitor/planner.html", context)


@staff_only
@require_POST
def apply_recommendation(request):
    """Write the planner's recommendation into a profile (validated like any edit)."""
    profile = ServerProfile.objects.filter(pk=request.POST.get("profile")).first()
    if profile is None:
        flash.error(request, _("Choose a profile."))
        return redirect("monitor:planner")
    try:
        values = {key: int(request.POST[key]) for key in ("gpu_layers", "ctx_size", "parallel", "cpu_moe_layers")}
        apply_plan(
            profile,
            cache_type_k=request.POST.get("cache_type_k", ""),
            cache_type_v=request.POST.get("cache_type_v", ""),
            **values,
        )
    except (KeyError, ValueError):
        flash.error(request, _("The recommendation could not be read."))
    except ValidationError as error:
        flash.error(request, " ".join(" ".join(messages) for messages in error.message_dict.values()))
    else:
        flash.success(
            request,
            _("Profile %(name)s now uses the recommended settings; restart it to apply them.") % {"name": profile.name},
        )
    return redirect(request.POST.get("next") or "monitor:planner")


def _flags(advice, request_) -> str:
    """The recommendation as llama-server options, ready to copy (profiles will apply it in one click)."""
    parts = [
        f"--n-gpu-layers {advice.gpu_layers}",
        f"--ctx-size {advice.ctx_size}",
        f"--parallel {request_.parallel}",
        f"--cache-type-k {request_.cache_type_k}",
        f"--cache-type-v {request_.cache_type_v}",
    ]
    if advice.cpu_moe_layers:
        parts.append(f"--n-cpu-moe {advice.cpu_moe_layers}")
    return " ".join(parts)


# The admin dashboard: live figures over /ws/monitor/, the rest from dashboard.json.


@staff_only
@require_GET
def dashboard_page(request):
    from monitor import dashboard

    gpus, gpu_problem = detect_gpus()
    return render(
        request,
        "monitor/dashboard.html",
        {
            "gpu_problem": "" if gpus else (gpu_problem or _("NVML found no GPU")),
            "profiles": ServerProfile.objects.all(),
            "ui_strings": _dashboard_strings(),
            "initial": {
                "request_figures": dashboard.request_figures(),
                "self_tests": dashboard.self_tests(),
                "latest_self_tests": dashboard.latest_self_test_per_profile(),
                "timeline": dashboard.timeline(),
            },
        },
    )


@staff_only
@require_GET
def dashboard_json(request):
    from monitor import dashboard

    body = {
        "request_figures": dashboard.request_figures(),
        "self_tests": dashboard.self_tests(),
        "latest_self_tests": dashboard.latest_self_test_per_profile(),
        "timeline": dashboard.timeline(),
    }
    if request.GET.get("history"):
        body["history"] = dashboard.history(hours=24)
    return JsonResponse(body)


@staff_only
@require_POST
def start_self_test(request):
    from monitor.tasks import run_self_test

    name = request.POST.get("profile") or None
    if name and not ServerProfile.objects.filter(name=name).exists():
        return JsonResponse({"error": _("No server profile named %(name)s.") % {"name": name[:64]}}, status=400)
    run_self_test.delay(name)
    return JsonResponse({"queued": True})


def metrics_endpoint(request):
    """Prometheus text for a staff session or a scraper's bearer token (QWENWEB_METRICS_TOKEN)."""
    from django.http import HttpResponse
    from prometheus_client import CONTENT_TYPE_LATEST

    from monitor.metrics import render as render_metrics
    from monitor.metrics import token_allows

    staff = request.user.is_authenticated and request.user.is_staff
    if not staff and not token_allows(request.headers.get("Authorization", "")):
        return render(request, "monitor/forbidden.html", status=403)
    return HttpResponse(render_metrics(), content_type=CONTENT_TYPE_LATEST)


def _dashboard_strings() -> dict:
    return {
        "no_gpu": _("no GPU"),
        "vram": _("VRAM"),
        "utilization": _("Utilization"),
        "temperature": _("Temperature"),
        "power": _("Power"),
        "clocks": _("Clocks (SM / memory)"),
        "throttle": _("Throttling"),
        "none": _("none"),
        "cpu": _("CPU"),
        "ram": _("RAM"),
        "swap": _("Swap"),
        "load": _("Load (1 min)"),
        "no_server": _("No llama-server to sample."),
        "unreachable": _("not answering"),
        "generation": _("Generation"),
        "prompt": _("Prompt"),
        "requests": _("Requests (processing / deferred)"),
        "kv": _("KV cache in use"),
        "slot": _("Slot"),
        "stale_sources": _("Not updating:"),
        "last_sample": _("Last sample:"),
        "nothing_yet": _("Nothing yet."),
        "passed": _("passed"),
        "selftest_running": _("Running the self-test…"),
        "selftest_done": _("Self-test finished."),
        "selftest_failed": _("Self-test failed:"),
        "sampler_down": _("The sampler is not running: the figures are old. Start it with manage.py run_sampler."),
        "redis_down": _("Redis is not answering: the figures are old."),
        "disconnected": _("Connection to the dashboard lost; reconnecting…"),
    }

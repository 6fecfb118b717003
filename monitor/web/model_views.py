"""Staff pages for model files: the registry, downloads with live progress, the VRAM planner."""

from __future__ import annotations

import psutil
from django.contrib import messages as flash
from django.core.exceptions import ValidationError
from django.http import JsonResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from monitor import tasks
from monitor.catalog import downloads
from monitor.catalog.advice import decode_speed, ram_advice, recommend
from monitor.catalog.planner import GIB, MIB, plan, plan_flags
from monitor.catalog.projection import ProjectionError, use_llama_compute
from monitor.catalog.registry import scan_models
from monitor.llama.binary import llama_server_binary
from monitor.models import DownloadJob, ServerProfile
from monitor.profiles import services
from monitor.telemetry.gpu import detect_gpus
from monitor.web.access import staff_only
from monitor.web.forms import ApplyPlanForm, DownloadForm, PlannerForm
from monitor.web.profile_views import loading_new_settings_message, start_on_nodes


def job_payload(job: DownloadJob) -> dict:
    return {
        "id": job.id,
        "name": job.file_name,
        "parts": len(job.parts),
        "status": job.status,
        "status_label": job.get_status_display(),
        "active": job.status in DownloadJob.ACTIVE,
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
        tasks.download_model.delay(job.id)
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
    job = downloads.restart_job(job_id)
    if job.status == DownloadJob.Status.QUEUED:
        tasks.download_model.delay(job.id)
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
        projection_problem = ""
        if form.cleaned_data["ask_llama"]:
            try:
                use_llama_compute(result, llama_server_binary(), model.path)
            except (ProjectionError, FileNotFoundError) as error:
                projection_problem = str(error)
        advice = recommend(model, request_, form.free_vram, form.margin)
        speed = decode_speed(
            model, advice.plan.request, form.cleaned_data["gpu_bandwidth_gbs"], form.cleaned_data["ram_bandwidth_gbs"]
        )
        budget = max(form.free_vram - form.margin, 1)
        ram_available = psutil.virtual_memory().available
        ram = ram_advice(model, request_, ram_available, form.ram_margin)
        context.update(
            model=model,
            plan=result,
            advice=advice,
            speed=speed,
            projection_problem=projection_problem,
            fits=result.vram <= form.free_vram - form.margin,
            ram_available=ram_available,
            ram=ram,
            ram_rows=ram_rows(result),
            bar={
                "weights": min(100, result.weights_gpu * 100 / budget),
                "kv": min(100, (result.kv_gpu + result.recurrent_gpu) * 100 / budget),
                "compute": min(100, (result.compute_gpu + result.runtime_gpu) * 100 / budget),
            },
            flags=" ".join(plan_flags(advice.plan.request)),
            plan_flags=" ".join(plan_flags(request_)),
        )
    return render(request, "monitor/planner.html", context)


def ram_rows(result) -> list[tuple[str, int]]:
    """The RAM plan's lines for the page, in the order people read them."""
    labels = {
        "weights": _("Weights in RAM"),
        "cache": _("KV cache and recurrent state in RAM"),
        "compute": _("Compute and output buffers"),
        "projector": _("Vision projector"),
        "prompt_cache": _("Prompt cache, at its cap (--cache-ram)"),
        "checkpoints": _("Context checkpoints, all kept (--ctx-checkpoints x slots)"),
        "process": _("llama-server itself"),
    }
    return [(labels[key], value) for key, value in result.ram_items.items()]


@staff_only
@require_POST
def apply_recommendation(request):
    """Write the planner's recommendation into a profile, validated and applied like any edit."""
    form = ApplyPlanForm(request.POST)
    if not form.is_valid():
        flash.error(request, _("The recommendation could not be read."))
        return redirect("monitor:planner")
    profile = form.cleaned_data["profile"]
    try:
        loading = services.apply_plan(profile, **form.plan_values())
    except ValidationError as error:
        flash.error(request, " ".join(" ".join(messages) for messages in error.message_dict.values()))
        return redirect("monitor:planner")
    serving = loading and services.serves_anywhere(profile)
    if start_on_nodes(request, profile, tasks.apply_profile, "load" if serving else None) and serving:
        flash.info(request, loading_new_settings_message(profile))
    else:
        flash.success(request, _("Profile %(name)s now uses the recommended settings.") % {"name": profile.name})
    return redirect(form.cleaned_data["next"] or "monitor:planner")

"""Staff pages for model files: the registry, downloads with live progress, the VRAM planner."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlencode

import psutil
from django.conf import settings
from django.contrib import messages as flash
from django.core.exceptions import ValidationError
from django.http import JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from monitor import tasks
from monitor.catalog import download_jobs
from monitor.catalog.advice import decode_speed, ram_advice, recommend
from monitor.catalog.known_models import KNOWN_MODELS
from monitor.catalog.planner import GIB, MIB, plan, plan_flags
from monitor.catalog.projection import ProjectionError, use_llama_compute
from monitor.catalog.registry import scan_models
from monitor.llama.binary import llama_server_binary
from monitor.models import DownloadJob, Node, ServerProfile
from monitor.nodes import model_files
from monitor.nodes.capacity import measured_here
from monitor.nodes.planning import node_plans
from monitor.nodes.registry import local_node
from monitor.profiles import services
from monitor.telemetry.gpu import detect_gpus
from monitor.telemetry.node_status import newest_samples
from monitor.web.access import staff_only
from monitor.web.forms import ApplyPlanForm, DownloadForm, NodeFileDownloadForm, PlannerForm, planner_data
from monitor.web.profile_views import loading_new_settings_message, start_on_nodes

JOBS_SHOWN = 50


def job_payload(job: DownloadJob, main_node: str) -> dict:
    """A download as the page draws it; ``main_node``: the name of the node a download without one went to."""
    return {
        "id": job.id,
        "node": job.node.name if job.node is not None else main_node,
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


def job_payloads() -> list[dict]:
    """The newest downloads, one row per node each went to."""
    main_node = local_node().name
    return [job_payload(job, main_node) for job in DownloadJob.objects.select_related("node")[:JOBS_SHOWN]]


@staff_only
@require_GET
def models_page(request):
    folder = download_jobs.models_dir()
    models, skipped = scan_models(folder)
    others = list(Node.objects.exclude(name=settings.NODE_NAME))  # the nodes other than this box
    rows = [
        (model, [node.name for node in others if str(model.path.relative_to(folder)) in node.registered_models])
        for model in models
    ]
    context = {
        "rows": rows, "others": others, "skipped": skipped, "form": DownloadForm(), "jobs": job_payloads(),
        "known_models": [(known, known.file in {model.path.name for model in models}) for known in KNOWN_MODELS],
    }  # fmt: skip
    return render(request, "monitor/models.html", context)


def _start(request, url: str, expected_sha256: str, nodes: list[Node]) -> None:
    """Downloads of ``url`` to ``nodes``, each sent to its node's worker; what happened, as flash messages."""
    jobs, problems = model_files.create_downloads(request.user, url, expected_sha256, nodes)
    for job in jobs:
        tasks.send_download(job)
    for problem in problems:
        flash.error(request, problem)
    if jobs:
        names = ", ".join(job.node.name for job in jobs)
        flash.success(
            request, _("Download of %(name)s started on %(nodes)s.") % {"name": jobs[0].file_name, "nodes": names}
        )


@staff_only
@require_POST
def start_download(request):
    form = DownloadForm(request.POST)
    if not form.is_valid():
        for errors in form.errors.values():
            flash.error(request, " ".join(errors))
        return redirect("monitor:models")
    _start(request, form.cleaned_data["url"], form.cleaned_data["sha256"], form.chosen_nodes())
    return redirect("monitor:models")


@staff_only
@require_POST
def download_for_profile(request, profile_id: int):
    """The profile's page: a file the profile needs, downloaded to a node it is placed on that lacks it,
    from where the file first came (verified against the SHA256s of that download), or from the URL given."""
    profile = get_object_or_404(ServerProfile, pk=profile_id)
    form = NodeFileDownloadForm(request.POST, profile=profile)
    if not form.is_valid():
        for errors in form.errors.values():
            flash.error(request, " ".join(errors))
    else:
        _start(request, form.url, form.expected_sha256, [form.cleaned_data["node"]])
    return redirect("monitor:profile", profile_id=profile.pk)


@staff_only
@require_POST
def cancel_download(request, job_id):
    download_jobs.cancel_job(job_id)
    return redirect("monitor:models")


@staff_only
@require_POST
def resume_download(request, job_id):
    job = download_jobs.restart_job(job_id)
    if job.status == DownloadJob.Status.QUEUED:
        tasks.send_download(job)
    return redirect("monitor:models")


@staff_only
@require_GET
def downloads_json(request):
    return JsonResponse({"jobs": job_payloads()})


@staff_only
@require_GET
def planner_page(request):
    models, _skipped = scan_models(download_jobs.models_dir())
    by_name = {m.path.name: m for m in models}
    gpus, gpu_problem = detect_gpus()
    initial = {"free_vram_gib": round(gpus[0].free_bytes / GIB, 2)} if gpus else {}
    if "profile" in request.GET and "model" not in request.GET:  # "plan this profile": its settings in the form
        return _plan_profile(request, by_name, initial.get("free_vram_gib", 8))
    form = PlannerForm(request.GET or None, model_names=list(by_name), initial=initial)
    context = {
        "form": form,
        "gpus": gpus,
        "gpu_problem": gpu_problem,
        "MIB": MIB,
        "profiles": ServerProfile.objects.all(),
        "local_profiles": ServerProfile.objects.filter(remote_url=""),
    }
    if form.is_bound and form.is_valid():
        model = by_name[form.cleaned_data["model"]]
        request_ = form.plan_request()
        context["node_plans"] = node_plans(
            model, str(model.path.relative_to(download_jobs.models_dir())), request_,
            margin=form.margin, ram_margin=form.ram_margin, profile=form.cleaned_data["profile"],
            samples={**newest_samples(list(Node.objects.values_list("name", flat=True))),
                     settings.NODE_NAME: measured_here(gpus, gpu_problem)},
        )  # fmt: skip
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
        context.update(
            model=model,
            plan=result,
            advice=advice,
            speed=speed,
            projection_problem=projection_problem,
            fits=result.vram <= form.free_vram - form.margin,
            ram_available=ram_available,
            ram=ram_advice(model, request_, ram_available, form.ram_margin),
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


def _plan_profile(request, by_name: dict, free_vram_gib: float):
    """The planner filled with a profile's settings (a page of its own address), or why it cannot be."""
    wanted = request.GET["profile"]
    profile = ServerProfile.objects.filter(pk=wanted, remote_url="").first() if wanted.isdigit() else None
    model = by_name.get(Path(profile.model_file).name) if profile is not None else None
    if model is None:
        flash.error(request, _("Only a profile whose model file is on this box can be planned here."))
        return redirect("monitor:planner")
    return redirect(reverse("monitor:planner") + "?" + urlencode(planner_data(profile, model, free_vram_gib)))


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

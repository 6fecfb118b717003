"""The admin dashboard (live figures over /ws/monitor/, the rest from dashboard.json), self-test, /metrics."""

from __future__ import annotations

from django.http import HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST
from prometheus_client import CONTENT_TYPE_LATEST

from monitor import tasks
from monitor.models import ServerProfile
from monitor.telemetry import dashboard
from monitor.telemetry.gpu import detect_gpus
from monitor.telemetry.node_status import main_node
from monitor.telemetry.prometheus import render as render_metrics
from monitor.telemetry.prometheus import token_allows
from monitor.telemetry.sampler import live_points
from monitor.web.access import staff_only


def _figures() -> dict:
    """What the page shows besides the live cards: request figures, self-tests, the timeline."""
    return {
        "request_figures": dashboard.request_figures(),
        "self_tests": dashboard.self_tests(),
        "latest_self_tests": dashboard.latest_self_test_per_profile(),
        "timeline": dashboard.timeline(),
    }


@staff_only
@require_GET
def dashboard_page(request):
    gpus, gpu_problem = detect_gpus()
    return render(
        request,
        "monitor/dashboard.html",
        {
            "gpu_problem": "" if gpus else (gpu_problem or _("NVML found no GPU")),
            "profiles": ServerProfile.objects.all(),
            "ui_strings": _dashboard_strings(),
            "live_points": live_points(),
            "initial": _figures(),
        },
    )


@staff_only
@require_GET
def dashboard_json(request):
    body = _figures()
    if request.GET.get("history"):
        body["history"] = dashboard.history(main_node(), hours=24)
    return JsonResponse(body)


@staff_only
@require_POST
def start_self_test(request):
    name = request.POST.get("profile") or None
    if name and not ServerProfile.objects.filter(name=name).exists():
        return JsonResponse({"error": _("No server profile named %(name)s.") % {"name": name[:64]}}, status=400)
    tasks.run_self_test.delay(name)
    return JsonResponse({"queued": True})


def metrics_endpoint(request):
    """Prometheus text for a staff session or a scraper's bearer token (QWENWEB_METRICS_TOKEN)."""
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
        "main_box": _("main box"),
        "gpu": _("GPU"),
        "node_up": _("up"),
        "node_down": _("down"),
        "heartbeat": _("Heartbeat"),
        "ago": _("%(age)s ago"),
        "never": _("never seen"),
        "router_silent": _("llama-server is not answering"),
        "no_nvidia_gpu": _("No NVIDIA GPU"),
        "vram_used_free": _("VRAM used / free"),
        "serves": _("Serves"),
        "serves_nothing": _("no profile loaded"),
        "slots_busy_free": _("slots busy / free"),
        "tokens_per_s": _("tokens/s generation / prompt"),
        "no_figures": _("No figures from this node's sampler (manage.py run_sampler)."),
        "figures_age": _("Figures:"),
    }

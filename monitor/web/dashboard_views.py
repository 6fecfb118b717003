"""The admin dashboard (live figures over /ws/monitor/, the rest from dashboard.json), self-test, /metrics."""

from __future__ import annotations

from django.http import HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST
from prometheus_client import CONTENT_TYPE_LATEST

from monitor import tasks
from monitor.models import ServerProfile
from monitor.nodes.readiness import READY_TTL_S
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
    profiles = list(ServerProfile.objects.all())
    return render(
        request,
        "monitor/dashboard.html",
        {
            "gpu_problem": "" if gpus else (gpu_problem or _("NVML found no GPU")),
            "profiles": profiles,
            # The kind of each embeddings or reranking profile, shown beside it where a node serves it.
            "profile_kinds": {
                profile.name: str(profile.get_kind_display()) for profile in profiles if not profile.is_chat
            },
            "live_points": live_points(),
            "node_down_after_s": READY_TTL_S,
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

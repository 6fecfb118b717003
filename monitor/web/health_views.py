"""Health: ``/healthz`` for anyone (ok or not, nothing more) and the staff page with every part."""

from __future__ import annotations

from django.http import HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from monitor.telemetry import health
from monitor.web.access import staff_only


@never_cache
@require_GET
def healthz(request):
    if health.healthy():
        return HttpResponse("ok\n", content_type="text/plain; charset=utf-8")
    return HttpResponse("not ok\n", status=503, content_type="text/plain; charset=utf-8")


@never_cache
@staff_only
@require_GET
def health_page(request):
    return render(request, "monitor/health.html", {"report": health.report()})


@never_cache
@staff_only
@require_GET
def health_json(request):
    report = health.report()
    return JsonResponse(report, status=200 if report["ok"] else 503)

"""The usage ledger's pages: staff see everyone's (by person, group, key, model, node or kind), a person
only their own (by model, key or kind, whatever they ask for); each view also as CSV. Thin views over
chat.usage."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from chat.usage import export, selectors
from chat.usage.forms import UsageFilterForm
from chat.web.forms import first_error
from chat.web.user_views import staff_required


def _view(request: HttpRequest, *, own: bool):
    """(the form, the view asked for; None when the filters are refused)."""
    form = UsageFilterForm(request.GET or None, own=own)
    if request.GET and not form.is_valid():
        return form, None
    if not request.GET:
        form = UsageFilterForm({}, own=own)
        form.is_valid()
    return form, selectors.usage_view(form.filters(person=request.user.pk if own else None))


def _page(request: HttpRequest, *, own: bool) -> HttpResponse:
    form, view = _view(request, own=own)
    context = {"form": form, "view": view, "own": own, "error": "" if view else first_error(form)}
    if view is not None:
        context["choices"] = {} if own else selectors.choices(view.filters)
        context["header"] = export.header(view)
        context["query"] = request.GET.urlencode()
    return render(request, "chat/usage.html", context, status=200 if view else 400)


def _csv(request: HttpRequest, *, own: bool) -> HttpResponse:
    form, view = _view(request, own=own)
    if view is None:
        return HttpResponse(first_error(form), status=400, content_type="text/plain; charset=utf-8")
    response = StreamingHttpResponse(export.csv_lines(view), content_type="text/csv; charset=utf-8")
    name = f"usage-{view.filters.by}-{view.filters.start}-{view.filters.end}.csv"
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    response["Cache-Control"] = "no-store"
    return response


@staff_required
@require_GET
def usage_page(request: HttpRequest) -> HttpResponse:
    return _page(request, own=False)


@staff_required
@require_GET
def usage_csv(request: HttpRequest) -> HttpResponse:
    return _csv(request, own=False)


@login_required
@require_GET
def own_usage_page(request: HttpRequest) -> HttpResponse:
    return _page(request, own=True)


@login_required
@require_GET
def own_usage_csv(request: HttpRequest) -> HttpResponse:
    return _csv(request, own=True)

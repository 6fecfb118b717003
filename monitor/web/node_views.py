"""The staff Nodes page (nodes, join tokens, refused joins, removal) and the nodes' own calls.

The calls (``/nodes/join/``, ``/nodes/register/``, ``/nodes/check/``) are JSON from a node's
`make node`, not from a browser: no login, no CSRF token (they carry a join token or the node's
credential instead), bodies capped like every request (``qwenweb.body_limit``), attempts counted
per address. A refusal answers 403 with the reason in the node's language.
"""

from __future__ import annotations

import orjson
from django.contrib import messages as flash
from django.core.exceptions import ValidationError
from django.http import JsonResponse
from django.http.request import split_domain_port
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from monitor.models import JoinToken, Node
from monitor.nodes import joining, selectors
from monitor.nodes.joining import NodeError, NodeRefused
from monitor.web.access import staff_only
from monitor.web.node_forms import JoinTokenForm, clean_call, first_error


def _page(request, *, token: str = "", form: JoinTokenForm | None = None, status: int = 200):
    response = render(
        request,
        "monitor/nodes.html",
        {
            "rows": selectors.node_rows(),
            "tokens": selectors.open_tokens(),
            "refusals": [(event, _refusal_why(event.details)) for event in selectors.refusals()],
            "database": selectors.database_access(),
            "redis_loopback": selectors.redis_loopback_only(),
            "form": form or JoinTokenForm(),
            "token": token,
            "main_url": request.build_absolute_uri("/").rstrip("/"),
            "now": timezone.now(),
        },
        status=status,
    )
    if token:  # a page that shows a join token is kept by no cache
        response["Cache-Control"] = "no-store"
    return response


def _refusal_why(details: dict) -> str:
    return joining.refusal_text(details.get("reason", "invalid"), details.get("params") or {})


@staff_only
@require_GET
def nodes_page(request):
    return _page(request)


@staff_only
@require_POST
def create_token(request):
    form = JoinTokenForm(request.POST)
    if not form.is_valid():
        flash.error(request, first_error(form))
        return _page(request, form=form, status=400)
    _row, token = joining.create_token(request.user, form.cleaned_data["note"], form.cleaned_data["hours"])
    return _page(request, token=token, status=201)


@staff_only
@require_POST
def revoke_token(request, token_id: int):
    joining.revoke_token(get_object_or_404(JoinToken, pk=token_id).pk)
    flash.success(request, _("Join token revoked."))
    return redirect("monitor:nodes")


@staff_only
@require_http_methods(["GET", "POST"])
def remove_node(request, node_id: int):
    node = get_object_or_404(Node, pk=node_id)
    if request.method == "GET":
        return render(request, "monitor/node_remove.html", {"node": node, "database": selectors.database_access()})
    try:
        joining.remove(node)
    except NodeError as error:
        flash.error(request, str(error))
    else:
        flash.success(request, _("Node %(name)s removed: its keys no longer work.") % {"name": node.name})
    return redirect("monitor:nodes")


# ------------------------------------------------------------------------------------ the nodes' calls


def _address(request) -> str:
    return request.META.get("REMOTE_ADDR", "")


def _host(request) -> str:
    """The main box's host as the node reached it (checked against ALLOWED_HOSTS)."""
    return split_domain_port(request.get_host())[0].strip("[]")


def _credential(request) -> str:
    scheme, _sep, value = request.headers.get("Authorization", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" else ""


def _node_call(request, handle, **rules) -> JsonResponse:
    """Parse and check the call, run ``handle(fields, facts)``; a refusal (recorded) answers 403."""
    payload = None
    try:
        payload = orjson.loads(request.body)
        fields, facts = clean_call(payload, **rules)
    except (orjson.JSONDecodeError, ValidationError) as error:
        message = "; ".join(error.messages) if isinstance(error, ValidationError) else str(error)
        name = payload.get("name", "") if isinstance(payload, dict) else ""
        try:
            joining.count_attempt(_address(request))
            refused = joining.refuse("invalid", name=str(name)[:48], address=_address(request), error=message[:300])
        except NodeRefused as too_many:
            return _refused(too_many)
        return JsonResponse({"error": str(refused)}, status=400)
    try:
        return JsonResponse(handle(fields, facts))
    except NodeRefused as refused:
        return _refused(refused)


def _refused(refused: NodeRefused) -> JsonResponse:
    return JsonResponse({"error": str(refused)}, status=429 if refused.reason == "too_many" else 403)


@csrf_exempt
@require_POST
def join(request):
    def handle(fields: dict, facts: dict) -> dict:
        joining.count_attempt(_address(request))
        return joining.join(
            fields["token"], fields["name"], fields["url"], facts, address=_address(request), host=_host(request)
        )

    return _node_call(request, handle, token=True)


@csrf_exempt
@require_POST
def register(request):
    def handle(fields: dict, facts: dict) -> dict:
        node = joining.authenticated(fields["name"], _credential(request), _address(request))
        return joining.register(node, fields["url"], facts, host=_host(request))

    return _node_call(request, handle)


@csrf_exempt
@require_POST
def check(request):
    def handle(fields: dict, _facts: dict) -> dict:
        return {"name": joining.authenticated(fields["name"], _credential(request), _address(request)).name}

    return _node_call(request, handle, facts=False)

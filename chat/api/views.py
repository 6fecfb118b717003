"""The /v1/ endpoints: thin async views over the API's admission (``chat.api.admission``), relay
(``chat.api.relay``) and model list. Authenticated only by ``Authorization: Bearer <key>`` (no session,
no CSRF); every error in OpenAI's shape."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.utils.translation import gettext as _
from django.views.decorators.csrf import csrf_exempt

from chat.api import admission, model_list, relay
from chat.api.errors import ApiError


def _error(error: ApiError) -> JsonResponse:
    response = JsonResponse(error.body(), status=error.status)
    if error.retry_after_s is not None:
        response["Retry-After"] = str(error.retry_after_s)
    return response


def _method_not_allowed(allowed: str) -> JsonResponse:
    response = _error(
        ApiError(405, _("Use %(method)s on this endpoint.") % {"method": allowed}, code="method_not_allowed")
    )
    response["Allow"] = allowed
    return response


@csrf_exempt
async def relay_call(request: HttpRequest, endpoint: str) -> HttpResponse:
    """A call to one of the relayed endpoints (``chat.api.calls.KINDS``), named by the URL's ``endpoint``."""
    if request.method != "POST":
        return _method_not_allowed("POST")
    try:
        # One byte over the limit is enough to refuse; the body is already spooled by the server,
        # and is read only for a caller whose key, rate and quota pass.
        key, call = await admission.open_call(
            request.headers.get("Authorization"), endpoint, lambda: request.read(settings.API_MAX_BODY_BYTES + 1)
        )
        if not call.stream:
            return HttpResponse(await relay.complete(call, key), content_type="application/json")
        events = relay.stream(call, key)
        await anext(events)  # waits for the queue and llama-server's first bytes; errors raise here
    except ApiError as error:
        return _error(error)
    response = StreamingHttpResponse(events, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response


@csrf_exempt
async def models(request: HttpRequest, name: str | None = None) -> HttpResponse:
    if request.method != "GET":
        return _method_not_allowed("GET")
    try:
        owner = (await admission.admit(request.headers.get("Authorization"))).owner_id
        models = await model_list.list_models(owner) if name is None else await model_list.get_model(owner, name)
        return JsonResponse(models)
    except ApiError as error:
        return _error(error)


@csrf_exempt
async def unknown(request: HttpRequest) -> HttpResponse:
    return _error(ApiError(404, _("Unknown API endpoint: %(path)s") % {"path": request.path[:200]}, code="unknown_url"))

"""API keys and the "connect an agent" page: thin views over chat.api.keys."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages as flash
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from chat.api import keys
from chat.conversations.selectors import model_names
from chat.errors import ChatError, NotFound


def _keys_page(request, new_key: str | None = None, status: int = 200):
    response = render(
        request,
        "chat/api_keys.html",
        {
            "keys": keys.list_keys(request.user),
            "new_key": new_key,
            "max_name": keys.MAX_NAME_CHARS,
            "max_keys": settings.MAX_API_KEYS_PER_USER,
            "rpm": settings.API_KEY_RPM,
        },
        status=status,
    )
    # A page that shows a new key must not be kept by any cache or the browser's history.
    response["Cache-Control"] = "no-store"
    return response


@login_required
@require_GET
def api_keys(request):
    return _keys_page(request)


@login_required
@require_POST
def create_api_key(request):
    try:
        _row, key = keys.create_key(request.user, request.POST.get("name", ""))
    except ChatError as error:
        flash.error(request, str(error))
        return redirect("chat:api-keys")
    return _keys_page(request, new_key=key, status=201)


@login_required
@require_POST
def revoke_api_key(request, key_id: int):
    try:
        row = keys.revoke_key(request.user, key_id)
    except NotFound as error:
        raise Http404(str(error)) from error
    flash.success(
        request, _("The key %(name)s is revoked: requests with it are refused from now on.") % {"name": row.name}
    )
    return redirect("chat:api-keys")


@login_required
@require_GET
def connect_agent(request):
    models = model_names(request.user.pk)
    return render(
        request,
        "chat/connect.html",
        {
            "base_url": request.build_absolute_uri("/v1"),
            "models": models,
            "example_model": models[0] if models else "MODEL",
            "has_key": any(k.is_active for k in keys.list_keys(request.user)),
        },
    )

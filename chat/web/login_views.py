"""The page a locked-out login gets (django-axes calls ``locked_out`` instead of the login view)."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.translation import ngettext

from chat.accounts.oidc_provider import provider_button


def locked_out(request: HttpRequest, original_response=None, credentials=None) -> HttpResponse:
    """The login page again, saying why and for how long; 429 for scripts."""
    message = ngettext(
        "Too many wrong passwords for this username from your address: logging in is locked for %(minutes)d minute.",
        "Too many wrong passwords for this username from your address: logging in is locked for %(minutes)d minutes.",
        settings.LOGIN_COOLOFF_MINUTES,
    ) % {"minutes": settings.LOGIN_COOLOFF_MINUTES}
    context = {
        "form": AuthenticationForm(request),
        "lockout_message": message,
        "next": request.POST.get("next", ""),
        "oidc_provider_name": provider_button(),
    }
    return render(request, "registration/login.html", context, status=429)

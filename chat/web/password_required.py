"""Middleware: a person whose password staff reset is sent to the password change page until they
choose their own. Reads only the session flag set at login, so other requests cost nothing."""

from __future__ import annotations

from django.shortcuts import redirect
from django.urls import reverse

from chat.web.account_views import MUST_CHANGE_PASSWORD


class PasswordChangeRequired:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.session.get(MUST_CHANGE_PASSWORD):
            allowed = (reverse("chat:password-change"), reverse("logout"), "/static/", "/i18n/")
            if not request.path.startswith(allowed):
                return redirect("chat:password-change")
        return self.get_response(request)

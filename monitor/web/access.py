"""Who may open the staff pages: staff only, and everyone else gets a plain 403 page."""

from __future__ import annotations

import functools

from django.shortcuts import render


def staff_only(view):
    """Staff pages answer 403 to everyone else (logged in or not), never a redirect to a login form."""

    @functools.wraps(view)
    def wrapped(request, *args, **kwargs):
        if not (request.user.is_authenticated and request.user.is_staff):
            return render(request, "monitor/forbidden.html", status=403)
        return view(request, *args, **kwargs)

    return wrapped

"""Content-Security-Policy on every response: what slips past the sanitizer still cannot run or fetch.

Django 5.2 has no CSP of its own (6.0 does) and the policy is one fixed header, so a few lines
here rather than django-csp and its nonce machinery: no page needs inline script or style.
"""

from __future__ import annotations

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.conf import settings
from django.http import HttpResponseBase


def _with_policy(response: HttpResponseBase) -> HttpResponseBase:
    response.headers.setdefault("Content-Security-Policy", settings.CONTENT_SECURITY_POLICY)
    return response


class ContentSecurityPolicyMiddleware:
    """Works in both modes, so async views (the API's streams) stay async."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request):
        if self.is_async:
            return self._acall(request)
        return _with_policy(self.get_response(request))

    async def _acall(self, request):
        return _with_policy(await self.get_response(request))

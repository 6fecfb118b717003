"""What the OpenAI-compatible API (``/v1/``) keeps of the pages' middleware, and the routing to its handler.

The API's views are async and authenticate each call by its key: no session, CSRF token,
messages, login lockout or HTML to protect. Its own Django handler
(`qwenweb.patches.api_handler`) runs ``ApiMiddleware`` alone: the host check, the caller's
language, the security headers and policy.
"""

from __future__ import annotations

from asgiref.sync import markcoroutinefunction
from django.middleware.clickjacking import XFrameOptionsMiddleware
from django.middleware.security import SecurityMiddleware
from django.utils import translation
from django.utils.cache import patch_vary_headers

from qwenweb.body_limit import API_PREFIX


class ApiMiddleware:
    """What the pages' stack did that an API answer needs, without a thread hop: the host checked
    against ALLOWED_HOSTS, the caller's language (its Accept-Language, as LocaleMiddleware reads it)
    for the whole answer, a streamed one too, Django's security headers, HTTPS redirect and frame
    options (its middleware's own hooks: header logic only, called in place), a JSON answer's length.
    The content security policy, as on every response, wraps it (``qwenweb.csp``, async already)."""

    sync_capable = False
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        self.security = SecurityMiddleware(get_response)
        self.frames = XFrameOptionsMiddleware(get_response)
        markcoroutinefunction(self)

    async def __call__(self, request):
        request.get_host()  # DisallowedHost (400) for a name the box does not answer to
        language = translation.get_language_from_request(request)  # LocaleMiddleware's choice, its own rule
        translation.activate(language)  # this request's context only (asgiref Local), as LocaleMiddleware does
        request.LANGUAGE_CODE = language
        response = self.security.process_request(request) or await self.get_response(request)
        response.headers.setdefault("Content-Language", language)
        patch_vary_headers(response, ("Accept-Language",))
        if not response.streaming and not response.has_header("Content-Length"):
            response.headers["Content-Length"] = str(len(response.content))
        return self.frames.process_response(request, self.security.process_response(request, response))


class ByPath:
    """HTTP requests under ``/v1/`` to the API's handler, every other one to the pages' Django."""

    def __init__(self, api, pages):
        self.api = api
        self.pages = pages

    async def __call__(self, scope, receive, send):
        application = self.api if scope["path"].startswith(API_PREFIX) else self.pages
        return await application(scope, receive, send)

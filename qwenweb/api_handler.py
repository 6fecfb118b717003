"""Django for the OpenAI-compatible API (``/v1/``), without the pages' middleware stack.

The API's views are async and authenticate each call by its key: no session, CSRF token,
messages, login lockout or HTML to protect. Each of Django's own middleware runs its hooks in a
worker thread when the request is async (``MiddlewareMixin.__acall__``: two thread hops each),
so the pages' stack cost every API call about twenty hand-offs between threads before its view
ran: time an agent waits for its first token and CPU taken from the model on a small box
(bench/cpu_bench.py, bench/api_bench.py). This handler keeps what the API's answers need: the
caller's language for its error messages, and ``nosniff``.
"""

from __future__ import annotations

from django.conf import settings
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.exception import convert_exception_to_response
from django.utils import translation
from django.utils.cache import patch_vary_headers

from qwenweb.body_limit import API_PREFIX, request_language


class ApiLanguage:
    """The caller's language (its Accept-Language, as LocaleMiddleware reads it) for the whole answer,
    a streamed one too; and the headers a JSON answer carries."""

    sync_capable = False
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response

    async def __call__(self, request):
        language = request_language(request.headers.get("Cookie", ""), request.headers.get("Accept-Language", ""))
        translation.activate(language)  # this request's context only (asgiref Local), as LocaleMiddleware does
        request.LANGUAGE_CODE = language
        response = await self.get_response(request)
        response.headers.setdefault("Content-Language", language)
        patch_vary_headers(response, ("Accept-Language",))
        if settings.SECURE_CONTENT_TYPE_NOSNIFF:
            response.headers.setdefault("X-Content-Type-Options", "nosniff")
        return response


class ApiHandler(ASGIHandler):
    def load_middleware(self, is_async: bool = False) -> None:
        self._view_middleware = []
        self._template_response_middleware = []
        self._exception_middleware = []
        inner = convert_exception_to_response(self._get_response_async)
        self._middleware_chain = convert_exception_to_response(ApiLanguage(inner))


class ByPath:
    """HTTP requests under ``/v1/`` to the API's handler, every other one to the pages' Django."""

    def __init__(self, api, pages):
        self.api = api
        self.pages = pages

    async def __call__(self, scope, receive, send):
        application = self.api if scope["path"].startswith(API_PREFIX) else self.pages
        return await application(scope, receive, send)

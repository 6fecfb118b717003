"""Django for the OpenAI-compatible API (``/v1/``), without the pages' middleware stack.

The API's views are async and authenticate each call by its key: no session, CSRF token,
messages, login lockout or HTML to protect. Each of Django's own middleware runs its hooks in a
worker thread when the request is async (``MiddlewareMixin.__acall__``: two thread hops each),
so the pages' stack cost every API call eleven hand-offs between threads (three now: Django's
request signals): time an agent waits for its first token and CPU taken from the model on a small box
(bench/cpu_bench.py, bench/api_bench.py). This handler keeps what the API's answers need
(``ApiMiddleware``): the host check, the caller's language, the security headers and policy.
"""

from __future__ import annotations

from asgiref.sync import markcoroutinefunction
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.exception import convert_exception_to_response
from django.middleware.clickjacking import XFrameOptionsMiddleware
from django.middleware.security import SecurityMiddleware
from django.utils import translation
from django.utils.cache import patch_vary_headers

from qwenweb.body_limit import API_PREFIX
from qwenweb.csp import ContentSecurityPolicyMiddleware


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


class ApiHandler(ASGIHandler):
    """Django's handler, two things apart: the API's own middleware (``ApiMiddleware``), and no
    ``ThreadSensitiveContext``: a page request's sync work runs in a thread made for the request,
    which opens a database connection of its own and closes it at the end (about 1 ms of CPU
    each, with the thread's start); an API call's few database steps run in the one database
    thread the chat sockets share (asgiref's), whose connection is kept (``DB_CONN_MAX_AGE``)."""

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        await self.handle(scope, receive, send)

    def load_middleware(self, is_async: bool = False) -> None:
        self._view_middleware = []
        self._template_response_middleware = []
        self._exception_middleware = []
        inner = convert_exception_to_response(self._get_response_async)
        api = convert_exception_to_response(ApiMiddleware(inner))
        self._middleware_chain = convert_exception_to_response(ContentSecurityPolicyMiddleware(api))


class ByPath:
    """HTTP requests under ``/v1/`` to the API's handler, every other one to the pages' Django."""

    def __init__(self, api, pages):
        self.api = api
        self.pages = pages

    async def __call__(self, scope, receive, send):
        application = self.api if scope["path"].startswith(API_PREFIX) else self.pages
        return await application(scope, receive, send)

"""Django's ASGI handler for the OpenAI-compatible API (``/v1/``): its own middleware, no per-request thread.

Django builds one middleware chain, from ``MIDDLEWARE``, for every request, and runs each of its
own middleware's hooks in a worker thread when the request is async (``MiddlewareMixin.__acall__``:
two thread hops each): the pages' stack cost every API call eleven hand-offs between threads. Its
``ASGIHandler`` also runs each request in a ``ThreadSensitiveContext``: the request's sync work
in a thread made for it, which opens a database connection of its own and closes it at the end.
Neither has a setting. This handler builds its chain from ``ApiMiddleware`` alone (the host check,
the caller's language, the security headers; `qwenweb.api_middleware`) and the content security
policy, and runs without that context: an API call's few database steps run in the one database
thread the chat sockets share (asgiref's), whose connection is kept (``DB_CONN_MAX_AGE``).

Its private parts: ``load_middleware`` fills ``BaseHandler``'s private chains
(``_middleware_chain``, ``_view_middleware``, ...) as Django's own does, and ``__call__`` is
``ASGIHandler.__call__`` without the context.

Gain, bench/patches_bench.py (the runs in docs/performance.md): 1.2-1.9 ms less of the web
process's CPU per API call, and 1.2-2.7 ms off the call's median time.
"""

from __future__ import annotations

from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.exception import convert_exception_to_response

from qwenweb.api_middleware import ApiMiddleware
from qwenweb.csp import ContentSecurityPolicyMiddleware
from qwenweb.patches.guard import Patch

PATCH = Patch(
    "api_handler",
    versions={"django": "5.2.19"},
    touches={
        "django": (
            "django.core.handlers.asgi:ASGIHandler.__call__>ThreadSensitiveContext",
            "django.core.handlers.asgi:ASGIHandler.__call__>handle",
            "django.core.handlers.asgi:ASGIHandler.__init__>load_middleware",
            "django.core.handlers.base:BaseHandler.load_middleware>_middleware_chain",
            "django.core.handlers.base:BaseHandler.load_middleware>_view_middleware",
            "django.core.handlers.base:BaseHandler.load_middleware>_template_response_middleware",
            "django.core.handlers.base:BaseHandler.load_middleware>_exception_middleware",
            "django.core.handlers.base:BaseHandler.get_response_async>_middleware_chain",
            "django.core.handlers.base:BaseHandler._get_response_async",
        )
    },
)


class ApiHandler(ASGIHandler):
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


def apply() -> None:
    """Nothing to replace: `qwenweb.asgi` routes ``/v1/`` to an ``ApiHandler``."""

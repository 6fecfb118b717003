"""The WebSocket speaks the page's language: Django's LocaleMiddleware only runs for HTTP, so the
chat socket's refusals (limits, quotas) would otherwise always be English. The language is picked
from the handshake's cookie and Accept-Language headers, as LocaleMiddleware picks it."""

from __future__ import annotations

from django.utils import translation

from qwenweb.request_language import scope_language


class SocketLanguage:
    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        language = scope_language(scope)
        # Django's active language is a context variable: the consumer's handlers inherit it.
        with translation.override(language):
            return await self.app(scope, receive, send)

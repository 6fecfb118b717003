"""Refuse WebSocket handshakes whose Origin is not the page's own host.

Channels' AllowedHostsOriginValidator compares the Origin with ALLOWED_HOSTS, which
on a LAN box is often "*". A browser always sends Origin on a WebSocket handshake,
so a missing or foreign one means another site (or no browser) is asking.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings

from qwenweb.request_language import scope_header


def is_same_origin(scope: dict) -> bool:
    origin = scope_header(scope, b"origin")
    host = scope_header(scope, b"host")
    if not origin or not host:
        return False
    parsed = urlsplit(origin)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        return False
    if parsed.netloc.lower() == host.lower():
        return True
    trusted = {urlsplit(item).netloc.lower() for item in settings.CSRF_TRUSTED_ORIGINS}
    return parsed.netloc.lower() in trusted


class SameOriginValidator:
    def __init__(self, application):
        self.application = application

    async def __call__(self, scope, receive, send):
        if scope["type"] == "websocket" and not is_same_origin(scope):
            denier = WebsocketDenier()
            return await denier(scope, receive, send)
        return await self.application(scope, receive, send)

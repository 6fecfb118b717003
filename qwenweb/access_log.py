"""The web server's access log, through Python's logging: secrets redacted like every other line.

Daphne's own access log writes straight to its output, past every logging filter, and a path can
carry a secret (an invite link's sign-up token). `qwenweb.serve` turns it off (Daphne's
``--verbosity 0``) and this ASGI wrapper writes the same lines to the ``qwenweb.access`` logger,
whose console handler redacts them (``qwenweb.redaction.RedactSecrets``, settings.LOGGING): one
line per HTTP request, with its status and size, and a line when a WebSocket opens and when it
ends. A WebSocket's messages pass untouched; an HTTP answer's are counted on their way.
"""

from __future__ import annotations

import logging

log = logging.getLogger("qwenweb.access")


def _client(scope: dict) -> str:
    client = scope.get("client")
    return f"{client[0]}:{client[1]}" if client else "-"


def _path(scope: dict) -> str:
    query = scope.get("query_string", b"")
    return scope.get("path", "") + ("?" + query.decode("latin1") if query else "")


class AccessLog:
    def __init__(self, application):
        self.application = application

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            return await self._http(scope, receive, send)
        if scope["type"] != "websocket":
            return await self.application(scope, receive, send)
        log.info('%s "WSCONNECTING %s"', _client(scope), scope.get("path", ""))
        try:
            return await self.application(scope, receive, send)
        finally:
            log.info('%s "WSDISCONNECT %s"', _client(scope), scope.get("path", ""))

    async def _http(self, scope, receive, send):
        status = None
        size = 0

        async def counted(message):
            nonlocal status, size
            if message["type"] == "http.response.start":
                status = message["status"]
            else:
                size += len(message.get("body", b""))
            await send(message)

        try:
            return await self.application(scope, receive, counted)
        finally:
            log.info('%s "%s %s" %s %s', _client(scope), scope["method"], _path(scope), status or "-", size)

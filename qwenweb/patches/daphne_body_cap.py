"""The request-body cap inside Daphne itself, while the bytes arrive.

Twisted (under Daphne) keeps the whole body, in memory for a chunked one, before the ASGI app is
called at all, so `qwenweb.body_limit` alone cannot stop an endless body from filling the web
process, and neither Daphne nor Twisted has a setting for a limit. This request class counts the
body as Twisted hands it over (``gotLength``, ``handleContentChunk``: Twisted's interface for a
request) and, once past the path's limit (or at once for a Content-Length over it), answers 413
with the limit named and closes the connection, as Twisted does with a malformed request.

Its private parts: Daphne's HTTP factory builds each request from its module global
``WebRequest``, which this replaces; the path is read from Twisted's ``HTTPChannel._path`` (the
request line, parsed before the headers; a request's own ``path`` is set only once the whole body
has come). A security patch, not a speed one: no bench figure.
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

from daphne import http_protocol

from qwenweb.body_limit import body_limit, refusal
from qwenweb.patches.guard import Patch
from qwenweb.request_language import request_language

PATCH = Patch(
    "daphne_body_cap",
    versions={"daphne": "4.2.3", "twisted": "26.10.0"},
    touches={
        "daphne": ("daphne.http_protocol:WebRequest", "daphne.http_protocol:HTTPFactory.buildProtocol>WebRequest"),
        "twisted": (
            "twisted.web.http:Request.gotLength",
            "twisted.web.http:Request.handleContentChunk",
            "twisted.web.http:HTTPChannel.lineReceived>_path",
            "twisted.web.http:HTTPChannel.allHeadersReceived>gotLength",
        ),
    },
)

STATUS_LINE = b"HTTP/1.1 413 Content Too Large\r\n"
log = logging.getLogger(__name__)


class BodyCappedRequest(http_protocol.WebRequest):
    def gotLength(self, length):
        # No fallback: without the request line's path the limit would be a guess (the check at
        # start-up makes sure Twisted sets it; a request without it ends here, unread).
        self._cap_path = urlsplit(self.channel._path.decode("latin1")).path
        self._cap_limit = body_limit(self._cap_path)
        self._cap_seen = 0
        self._cap_refused = False
        if length is not None and length > self._cap_limit:
            self._refuse_body()
            return
        super().gotLength(length)

    def handleContentChunk(self, data):
        if self._cap_refused:
            return
        self._cap_seen += len(data)
        if self._cap_seen > self._cap_limit:
            self._refuse_body()
            return
        super().handleContentChunk(data)

    def _header(self, name: bytes) -> str:
        values = self.requestHeaders.getRawHeaders(name) or [b""]
        return values[0].decode("latin1")

    def _refuse_body(self) -> None:
        self._cap_refused = True
        language = request_language(self._header(b"cookie"), self._header(b"accept-language"))
        body, content_type = refusal(self._cap_path, self._cap_limit, language)
        head = b"Content-Type: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % (content_type, len(body))
        self.channel.transport.write(STATUS_LINE + head + body)
        self.channel.loseConnection()
        # Never reaches the app (nor its access log): named here.
        log.warning("413 %s: a request body over %d bytes refused", self._cap_path, self._cap_limit)


def apply() -> None:
    http_protocol.WebRequest = BodyCappedRequest

"""The request-body cap inside Daphne itself, while the bytes arrive.

Twisted (under Daphne) keeps the whole body, in memory for a chunked one, before the ASGI app is
called at all, so `qwenweb.body_limit` alone cannot stop an endless body from filling the web
process. This request class counts the body as Twisted hands it over and, once past the path's
limit (or at once for a Content-Length over it), answers 413 with the limit named and closes the
connection, as Twisted does with a malformed request. `qwenweb.serve` installs it.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from daphne import http_protocol

from qwenweb.body_limit import body_limit, refusal
from qwenweb.request_language import request_language

STATUS_LINE = b"HTTP/1.1 413 Content Too Large\r\n"


class BodyCappedRequest(http_protocol.WebRequest):
    def gotLength(self, length):
        self._cap_path = urlsplit(getattr(self.channel, "_path", b"/").decode("latin1")).path
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


def install() -> None:
    """Daphne's HTTP factory builds its requests from this module global (daphne 4.2.3)."""
    http_protocol.WebRequest = BodyCappedRequest

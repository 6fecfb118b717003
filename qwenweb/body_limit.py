"""Refuse an HTTP request body over its path's limit while it streams in, before Django spools it.

Django reads the whole body into a temporary file before any view runs, so a size check in a view
comes after the disk (or memory) was spent. This ASGI wrapper counts the body chunks as they reach
the app and answers 413 with the limit named once they pass it; a Content-Length over the limit is
refused before a byte is read. `/v1/` gets OpenAI's error shape, the document upload the JSON its
page reads, everything else a line of text, in the language the request asks for (``request_language``).
"""

from __future__ import annotations

import orjson
from django.conf import settings
from django.utils import translation
from django.utils.translation import gettext as _

from qwenweb.request_language import scope_header, scope_language

API_PREFIX = "/v1/"
DOCUMENT_UPLOAD_PATH = "/documents/upload/"


def body_limit(path: str) -> int:
    if path.startswith(API_PREFIX):
        return settings.API_MAX_BODY_BYTES
    if path == DOCUMENT_UPLOAD_PATH:
        return settings.DOCUMENT_MAX_BYTES + settings.MULTIPART_OVERHEAD_BYTES
    return settings.HTTP_MAX_BODY_BYTES


def refusal(path: str, limit: int, language: str) -> tuple[bytes, bytes]:
    """The 413 body and its content type, the limit named in the person's language."""
    with translation.override(language):
        if path == DOCUMENT_UPLOAD_PATH:
            message = _("The file is too large: the limit is %(mb)d MB.") % {
                "mb": settings.DOCUMENT_MAX_BYTES // 1_048_576
            }
            return orjson.dumps({"error": message}), b"application/json"
        message = _("The request is too large: the limit is %(mb)d MB.") % {"mb": max(1, limit // 1_048_576)}
    if path.startswith(API_PREFIX):
        error = {"message": message, "type": "invalid_request_error", "param": None, "code": "request_too_large"}
        return orjson.dumps({"error": error}), b"application/json"
    return message.encode(), b"text/plain; charset=utf-8"


class RequestBodyLimit:
    def __init__(self, application):
        self.application = application

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.application(scope, receive, send)
        path = scope.get("path", "")
        limit = body_limit(path)
        declared = scope_header(scope, b"content-length")
        if declared is not None and declared.strip().isdigit() and int(declared) > limit:
            return await self._refuse(scope, send, path, limit)
        received = 0
        refused = False

        async def counted_receive():
            nonlocal received, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    refused = True
                    await self._refuse(scope, send, path, limit)
                    # The app sees the client gone: Django stops reading and sends nothing.
                    return {"type": "http.disconnect"}
            return message

        await self.application(scope, counted_receive, send)

    async def _refuse(self, scope, send, path: str, limit: int) -> None:
        language = scope_language(scope)
        body, content_type = refusal(path, limit, language)
        headers = [
            (b"content-type", content_type),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
            (b"content-security-policy", settings.CONTENT_SECURITY_POLICY.encode()),
        ]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})

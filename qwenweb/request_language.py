"""The language a request asks for, for what answers before Django's LocaleMiddleware runs or
without it: a body refused over its limit (``body_limit``, ``daphne_body_cap``) and the chat
socket (``socket_language``). Chosen by LocaleMiddleware's own rule, Django's public
``translation.get_language_from_request`` (the language cookie, then Accept-Language by quality,
then LANGUAGE_CODE), over a bare ``HttpRequest`` that holds the two headers; the cookie header is
parsed by ``django.http.parse_cookie``, as Django parses it for a page, so both agree."""

from __future__ import annotations

from django.http import HttpRequest, parse_cookie
from django.utils import translation


def request_language(cookie: str, accept_language: str) -> str:
    """The language LocaleMiddleware would pick for a request with these Cookie and Accept-Language headers."""
    request = HttpRequest()
    request.COOKIES = parse_cookie(cookie)
    request.META["HTTP_ACCEPT_LANGUAGE"] = accept_language
    return translation.get_language_from_request(request)


def scope_header(scope: dict, name: bytes) -> str | None:
    """An ASGI request's or handshake's header (``name`` in lower case), the first if repeated."""
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return value.decode("latin1")
    return None


def scope_language(scope: dict) -> str:
    """The language of an ASGI request or WebSocket handshake, from its headers."""
    return request_language(scope_header(scope, b"cookie") or "", scope_header(scope, b"accept-language") or "")

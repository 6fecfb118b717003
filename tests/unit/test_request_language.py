"""The language a request asks for, where Django's LocaleMiddleware does not run (a body refused
over its limit, the chat socket): the same choice as LocaleMiddleware's for the same headers."""

import pytest
from django.conf import settings
from django.http import HttpResponse
from django.middleware.locale import LocaleMiddleware
from django.test import RequestFactory

from qwenweb.request_language import request_language, scope_header, scope_language

HEADERS = [
    ("django_language=zh-hans", "en"),  # the cookie first
    ("sessionid=abc; django_language=zh-hans; csrftoken=x", ""),
    ("django_language=fr", "zh-CN"),  # a language the box does not speak: Accept-Language decides
    ("", "fr;q=0.9, zh-CN;q=0.8"),
    ("", "zh-CN;q=0.5, en;q=0.9"),  # by quality, not by the order written
    ("", "zh-Hans-CN"),
    ("", "ZH-cn"),
    ("", "de, *;q=0.5, zh-cn;q=0.1"),  # "*" ends the list: the default
    ("", "en;q=abc,,;;"),  # malformed
    ("", "x" * 500),
    ("", ""),
]


def locale_middleware_choice(cookie: str, accept_language: str) -> str:
    request = RequestFactory().get("/", HTTP_COOKIE=cookie, HTTP_ACCEPT_LANGUAGE=accept_language)
    LocaleMiddleware(lambda request: HttpResponse()).process_request(request)
    return request.LANGUAGE_CODE


@pytest.mark.parametrize("cookie, accept_language", HEADERS)
def test_the_choice_is_locale_middlewares(cookie, accept_language):
    assert request_language(cookie, accept_language) == locale_middleware_choice(cookie, accept_language)


def test_cookie_then_accept_language_then_the_default():
    assert request_language("django_language=zh-hans", "en") == "zh-hans"
    assert request_language("django_language=fr", "zh-CN") == "zh-hans"
    assert request_language("", "zh-CN;q=0.5, en;q=0.9") == "en"
    assert request_language("", "de, *;q=0.5, zh-cn;q=0.1") == settings.LANGUAGE_CODE
    assert request_language("", "") == settings.LANGUAGE_CODE


def test_an_asgi_scope_is_read_from_its_headers():
    scope = {"headers": [(b"Accept-Language", b"zh-CN,zh;q=0.9"), (b"cookie", b"a=1")]}
    assert scope_language(scope) == "zh-hans"
    assert scope_header(scope, b"accept-language") == "zh-CN,zh;q=0.9"
    assert scope_header(scope, b"origin") is None
    assert scope_language({"headers": []}) == settings.LANGUAGE_CODE

"""The /v1/ API runs on a Django handler of its own: no page middleware (each a pair of thread hops
per request), the caller's language and nosniff kept; every other path keeps the pages' stack."""

import asyncio

import httpx
import pytest
from asgiref.sync import SyncToAsync

from qwenweb.asgi import application


def request(path: str, language: str = "en", cookie: str = "") -> tuple[httpx.Response, int]:
    """``path`` through the project's ASGI application; the answer and the thread hops it took."""
    hops = 0
    original = SyncToAsync.__call__

    async def counted(self, *args, **kwargs):
        nonlocal hops
        hops += 1
        return await original(self, *args, **kwargs)

    async def call() -> httpx.Response:
        transport = httpx.ASGITransport(app=application)
        headers = {"Accept-Language": language, "Cookie": cookie}
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            return await client.get(path, headers=headers)

    SyncToAsync.__call__ = counted
    try:
        response = asyncio.run(call())
    finally:
        SyncToAsync.__call__ = original
    return response, hops


@pytest.mark.parametrize(("language", "cookie", "expected"), [("en", "", "en"), ("zh-CN", "", "zh-hans")])
def test_an_api_error_comes_in_the_callers_language_without_the_pages_headers(language, cookie, expected):
    response, _hops = request("/v1/models", language, cookie)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "invalid_api_key"
    assert response.headers["Content-Language"] == expected
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert "Accept-Language" in response.headers["Vary"]
    if expected == "zh-hans":
        assert "API" in response.json()["error"]["message"] and "密钥" in response.json()["error"]["message"]
    # The pages' middleware did not run: no CSP, no frame options, no session or CSRF cookie.
    for header in ("Content-Security-Policy", "X-Frame-Options", "Set-Cookie"):
        assert header not in response.headers


def test_the_api_takes_a_fraction_of_the_pages_thread_hops():
    _page, page_hops = request("/login/")
    answer, api_hops = request("/v1/models")
    assert answer.status_code == 401
    # Django's request signals still run their receivers in a thread (3 hops); no middleware does
    # (a page, through the same application: 11).
    assert api_hops <= 3 and page_hops > 2 * api_hops

"""The /v1/ API runs on a Django handler of its own: no page middleware (each a pair of thread hops
per request), the caller's language and nosniff kept; every other path keeps the pages' stack."""

import asyncio
import threading

import httpx
import pytest
from asgiref.sync import SyncToAsync
from django.conf import settings
from django.db import connections
from django.db.backends.signals import connection_created
from django.test import Client

from qwenweb.asgi import application


def request(
    path: str, language: str = "en", cookie: str = "", key: str = "", host: str = "127.0.0.1"
) -> tuple[httpx.Response, int]:
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
        if key:
            headers["Authorization"] = f"Bearer {key}"
        async with httpx.AsyncClient(transport=transport, base_url=f"http://{host}") as client:
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
    # The policy every response carries (tests/integration/test_request_limits.py), no session or CSRF cookie.
    assert response.headers["Content-Security-Policy"] == settings.CONTENT_SECURITY_POLICY
    assert response.headers["X-Frame-Options"] == "DENY" and response.headers["Referrer-Policy"] == "same-origin"
    assert "Set-Cookie" not in response.headers


def test_the_api_answers_only_the_names_the_box_answers_to():
    assert request("/v1/models", host="rebound.example")[0].status_code == 400  # ALLOWED_HOSTS, as for pages
    assert request("/v1/models", host="localhost")[0].status_code == 401


def test_the_api_takes_a_fraction_of_the_pages_thread_hops():
    _page, page_hops = request("/login/")
    answer, api_hops = request("/v1/models")
    assert answer.status_code == 401
    # Django's request signals still run their receivers in a thread (3 hops); no middleware does
    # (a page, through the same application: 11).
    assert api_hops <= 3 and page_hops > 2 * api_hops


def test_api_calls_keep_the_shared_database_threads_connection_and_pages_close_their_own(monkeypatch):
    """SQLite connections are kept per thread (DB_CONN_MAX_AGE). An API call's database steps run in
    the one database thread the chat sockets share, and keep its connection; a page request's thread
    ends with it, so its connection is closed there. Django's test client keeps its test's connection."""
    closed_in: list[threading.Thread] = []
    opened: list[tuple[threading.Thread, object]] = []
    close_all = connections.close_all
    monkeypatch.setattr(connections, "close_all", lambda: (closed_in.append(threading.current_thread()), close_all()))

    def created(connection, **_kwargs):
        opened.append((threading.current_thread(), connection))

    connection_created.connect(created)
    try:
        for _call in range(3):  # each key looked up, then refused
            answer, _hops = request("/v1/models", key="qw-abcdefgh_not-a-real-secret")
            assert answer.status_code == 401 and answer.json()["error"]["code"] == "invalid_api_key"
        api_opened = list(opened)
        assert closed_in == []
        if settings.DATABASES["default"]["CONN_MAX_AGE"]:  # kept (SQLite); a database server's: per call
            assert len(api_opened) <= 1  # three calls, one connection at most (none: the thread had one)
            assert all(wrapper.connection is not None for _thread, wrapper in api_opened)
        opened.clear()
        page, _hops = request("/login/", key="qw-abcdefgh_not-a-real-secret")
    finally:
        connection_created.disconnect(created)
    assert page.status_code == 200
    assert closed_in and threading.main_thread() not in closed_in
    assert all(wrapper.connection is None for _thread, wrapper in opened)
    closed_in.clear()
    assert Client().get("/login/", HTTP_HOST="127.0.0.1").status_code == 200
    assert closed_in == []

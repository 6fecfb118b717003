"""Limits at the edge of the web process, against the real Daphne started as `make run` starts it:
the Content-Security-Policy on every page, WebSocket frames past Daphne's old 1 MiB cap, and
request bodies over their path's limit."""

import json

import httpx
import psutil
import pytest
from django.conf import settings

from tests.support.client import base_url, chat_socket, login, make_user

pytestmark = pytest.mark.usefixtures("web_server")

MIB = 1024 * 1024


@pytest.mark.parametrize("path", ["/login/", "/admin/login/", "/no-such-page/", "/v1/models"])
def test_every_page_carries_the_policy(path):
    response = httpx.get(base_url() + path, timeout=30)
    assert response.headers["content-security-policy"] == settings.CONTENT_SECURITY_POLICY
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] == "same-origin"


def test_chat_page_carries_the_policy():
    page = login(make_user()).get("/")
    assert page.status_code == 200
    policy = page.headers["content-security-policy"]
    for directive in ("default-src 'self'", "script-src 'self'", "style-src 'self'", "object-src 'none'"):
        assert directive in policy


def test_a_foreign_host_header_is_refused():
    response = httpx.get(base_url() + "/login/", headers={"Host": "attacker.example"}, timeout=30)
    assert response.status_code == 400


def test_two_mib_frame_gets_the_apps_message(web_server):
    ws = chat_socket(login(make_user()))
    # Twice Daphne's default cap: it used to drop the socket with 1009 before the app read a byte.
    ws.send(json.dumps({"type": "send", "text": "x" * (2 * MIB)}))
    event = json.loads(ws.recv(timeout=30))
    assert event["type"] == "error"
    assert f"{settings.CHAT_MAX_MESSAGE_CHARS} characters" in event["message"]
    # Over the app's own frame limit (still under Daphne's): the frame-size message, socket kept.
    ws.send("y" * (settings.CHAT_MAX_FRAME_CHARS + 1))
    event = json.loads(ws.recv(timeout=60))
    assert event["type"] == "error" and "too large" in event["message"]
    ws.send(json.dumps({"type": "nonsense"}))
    assert json.loads(ws.recv(timeout=30))["type"] == "error"
    ws.close()


def test_oversized_api_body_gets_openai_shaped_413():
    body = b'{"model": "x", "messages": [], "pad": "' + b"a" * (settings.API_MAX_BODY_BYTES + MIB) + b'"}'
    response = httpx.post(
        base_url() + "/v1/chat/completions", content=body, headers={"Content-Type": "application/json"}, timeout=120
    )
    assert response.status_code == 413
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["code"] == "request_too_large"
    assert f"{settings.API_MAX_BODY_BYTES // MIB} MB" in error["message"]


def test_endless_body_is_refused_without_growing_the_web_process(web_server):
    daphne = psutil.Process(web_server.process.pid)
    before = daphne.memory_info().rss
    sent = 0

    def endless(total=128 * MIB, piece=b"z" * (256 * 1024)):
        nonlocal sent
        while sent < total:
            sent += len(piece)
            yield piece

    # No Content-Length (chunked): the cap is counted as the body arrives.
    response = httpx.post(base_url() + "/login/", content=endless(), timeout=300)
    grown = daphne.memory_info().rss - before
    assert response.status_code == 413
    assert f"{settings.HTTP_MAX_BODY_BYTES // MIB} MB" in response.text
    assert grown < 48 * MIB, f"the web process grew by {grown / MIB:.0f} MiB for a {sent / MIB:.0f} MiB body"
    # The process still answers.
    assert httpx.get(base_url() + "/login/", timeout=30).status_code == 200


def test_declared_length_over_the_limit_is_refused_before_the_body():
    import socket

    port = int(base_url().rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        raw.sendall(
            b"POST /v1/embeddings HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Accept-Language: zh-CN\r\nContent-Length: 10000000000\r\n\r\n{"
        )
        answer = b""
        while chunk := raw.recv(65536):
            answer += chunk
    head, _sep, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413")
    error = json.loads(body)["error"]
    assert error["code"] == "request_too_large" and "请求过大" in error["message"]

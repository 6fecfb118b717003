"""Which limit a path gets, what a refusal says, where the box answers, and the settings' switches."""

import orjson
from django.conf import settings

from qwenweb import network
from qwenweb.body_limit import body_limit, refusal
from qwenweb.serve import daphne_argv


def test_each_path_gets_its_limit():
    assert body_limit("/v1/chat/completions") == settings.API_MAX_BODY_BYTES
    assert body_limit("/documents/upload/") == settings.DOCUMENT_MAX_BYTES + settings.MULTIPART_OVERHEAD_BYTES
    assert body_limit("/login/") == settings.HTTP_MAX_BODY_BYTES
    assert body_limit("/v1") == settings.HTTP_MAX_BODY_BYTES  # only the API's own paths


def test_refusals_name_the_limit_in_the_callers_shape():
    body, content_type = refusal("/v1/embeddings", settings.API_MAX_BODY_BYTES, "en")
    error = orjson.loads(body)["error"]
    assert content_type == b"application/json"
    assert error["type"] == "invalid_request_error" and error["code"] == "request_too_large"
    assert "20 MB" in error["message"]
    body, content_type = refusal("/documents/upload/", body_limit("/documents/upload/"), "zh-hans")
    assert "文件太大" in orjson.loads(body)["error"] and "50 MB" in orjson.loads(body)["error"]
    body, content_type = refusal("/login/", settings.HTTP_MAX_BODY_BYTES, "en")
    assert content_type.startswith(b"text/plain") and b"1 MB" in body


def test_hosts_are_the_announced_addresses_and_loopback():
    hosts = network.served_hosts()
    assert {"localhost", "127.0.0.1", "[::1]"} <= set(hosts)
    assert set(network.lan_addresses()) <= set(hosts)
    assert settings.ALLOWED_HOSTS == hosts and "*" not in settings.ALLOWED_HOSTS
    assert settings.QWENWEB_LAN_ADDRESSES == network.lan_addresses()
    assert f"http://127.0.0.1:{settings.QWENWEB_PORT}" in settings.CSRF_TRUSTED_ORIGINS


def test_plain_http_install_keeps_cookies_usable_and_headers_strict():
    assert not settings.BEHIND_TLS
    assert not settings.SESSION_COOKIE_SECURE and settings.SECURE_HSTS_SECONDS == 0
    assert settings.SESSION_COOKIE_HTTPONLY and settings.X_FRAME_OPTIONS == "DENY"
    assert settings.SECURE_CONTENT_TYPE_NOSNIFF and settings.SECURE_REFERRER_POLICY == "same-origin"
    assert set(settings.SILENCED_SYSTEM_CHECKS) == {"security.W004", "security.W008", "security.W012", "security.W016"}


def test_daphne_gets_the_websocket_limit_from_the_settings():
    argv = daphne_argv(["--port", "1"])
    size = argv[argv.index("--websocket-max-message-size") + 1]
    assert int(size) == settings.WEBSOCKET_MAX_MESSAGE_BYTES > settings.CHAT_MAX_FRAME_CHARS
    assert argv[-1] == "qwenweb.asgi:application"

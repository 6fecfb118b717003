"""The web server's access log (qwenweb/access_log.py) never holds an invite link's token: it is a log
record like any other, and the console handler redacts every record."""

import asyncio
import io
import logging

import pytest
from django.urls import reverse

from qwenweb.access_log import AccessLog
from qwenweb.redaction import RedactSecrets

TOKEN = "s3cret-Invite_token-0123456789abcdef"


@pytest.fixture
def console(monkeypatch) -> io.StringIO:
    """What the console handler of settings.LOGGING (what supervisord writes to var/log/) writes."""
    handler = next(h for h in logging.getLogger().handlers if any(isinstance(f, RedactSecrets) for f in h.filters))
    written = io.StringIO()
    monkeypatch.setattr(handler, "stream", written)
    return written


async def _answer(scope, receive, send):
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"0123456789"})


def logged(console: io.StringIO, kind: str, path: str) -> str:
    scope = {"type": kind, "method": "GET", "path": path, "query_string": b"", "client": ("192.168.1.20", 5555)}
    sent = []

    async def send(message):
        sent.append(message)

    asyncio.run(AccessLog(_answer)(scope, None, send))
    if kind == "http":
        assert [message["type"] for message in sent] == ["http.response.start", "http.response.body"]
    return console.getvalue()


def test_an_invite_links_token_is_redacted_and_the_rest_of_the_line_kept(console):
    path = reverse("chat:signup-invite", args=[TOKEN])
    line = logged(console, "http", path)
    assert TOKEN not in line
    assert '192.168.1.20:5555 "GET /signup/invite/[redacted]/" 200 10' in line


def test_other_paths_and_sockets_are_logged_as_daphne_wrote_them(console):
    assert '"GET /c/42/export.md" 200 10' in logged(console, "http", "/c/42/export.md")
    lines = logged(console, "websocket", "/ws/chat/")
    assert '"WSCONNECTING /ws/chat/"' in lines and '"WSDISCONNECT /ws/chat/"' in lines


def test_log_records_that_carry_an_invite_path_are_redacted():
    # django-axes logs the request's path_info at every login, a sign-up's included. The console
    # handler of settings.LOGGING (what supervisord writes to var/log/) carries the filter.
    handlers = logging.getLogger().handlers
    console = next(h for h in handlers if any(isinstance(f, RedactSecrets) for f in h.filters))
    record = logging.LogRecord(
        "axes", logging.INFO, __file__, 1, "login %s", (f"path_info: /signup/invite/{TOKEN}/",), None
    )
    assert console.filter(record)
    assert TOKEN not in console.format(record) and "/signup/invite/[redacted]/" in console.format(record)


def test_the_oidc_callbacks_code_and_state_are_redacted(console):
    # The access log writes the query string with the path (``logged`` passes it in the path here).
    line = logged(console, "http", f"/oidc/callback/?code={TOKEN}&state=state-{TOKEN}")
    assert TOKEN not in line
    assert '"GET /oidc/callback/?[redacted]" 200 10' in line

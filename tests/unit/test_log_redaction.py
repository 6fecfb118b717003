"""The web server's access log never holds an invite link's token."""

import io
import logging

from django.urls import reverse

from qwenweb.redaction import RedactingAccessLog, RedactSecrets

TOKEN = "s3cret-Invite_token-0123456789abcdef"


def logged(protocol: str, action: str, path: str) -> str:
    stream = io.StringIO()
    details = {"client": "192.168.1.20:5555", "method": "GET", "path": path, "status": 200, "size": 10}
    RedactingAccessLog(stream)(protocol, action, details)
    return stream.getvalue()


def test_an_invite_links_token_is_redacted_and_the_rest_of_the_line_kept():
    path = reverse("chat:signup-invite", args=[TOKEN])
    line = logged("http", "complete", path)
    assert TOKEN not in line
    assert "GET /signup/invite/[redacted]/" in line and " 200 10" in line and line.startswith("192.168.1.20")


def test_other_paths_are_logged_as_daphne_writes_them():
    assert '"GET /c/42/export.md" 200 10' in logged("http", "complete", "/c/42/export.md")
    assert "WSCONNECTING /ws/chat/" in logged("websocket", "connecting", "/ws/chat/")


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

"""The web server's access log never holds an invite link's token."""

import io

from django.urls import reverse

from qwenweb.access_log import RedactingAccessLog

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

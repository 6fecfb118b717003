"""Daphne's access log without secrets: an invite link's token never reaches `var/log/web.log`.

Daphne writes every request's path to its access log (supervisord keeps it). An invite link
carries its sign-up token in the path, so the token is replaced before the line is written;
the rest of the line is Daphne's own. `qwenweb.serve` installs it.
"""

from __future__ import annotations

import re

from daphne import access

# Paths that carry a secret, with the part to keep before it (an allowlist of what is redacted
# would miss a new one; these are the app's own URL patterns, see chat/urls.py).
SECRET_PATHS = re.compile(r"(/signup/invite/)[^/\s]+")
REDACTED = r"\1[redacted]"


def redact(request_line: str) -> str:
    return SECRET_PATHS.sub(REDACTED, request_line)


class RedactingAccessLog(access.AccessLogGenerator):
    def write_entry(self, host, date, request, status=None, length=None, ident=None, user=None):
        super().write_entry(host, date, redact(request), status, length, ident, user)


def install() -> None:
    # daphne.cli imports Daphne's server, which installs Twisted's reactor: only where it serves.
    from daphne import cli

    cli.AccessLogGenerator = RedactingAccessLog

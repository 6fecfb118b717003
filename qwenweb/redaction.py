"""No secret in a log: an invite link's token never reaches `var/log/`.

An invite link carries its sign-up token in its path, and paths are logged twice: by Daphne's
access log (every request) and by libraries that log the request (django-axes logs `path_info`
at each login). Both go through ``redact``: the access log by ``RedactingAccessLog``, which
`qwenweb.serve` installs, every other record by the ``RedactSecrets`` filter on the console
handler (settings.LOGGING).
"""

from __future__ import annotations

import logging
import re

from daphne import access

# The app's own URL patterns that carry a secret (chat/urls.py), with the part kept before it.
SECRET_PATHS = re.compile(r"(/signup/invite/)[^/\s\"']+")
REDACTED = r"\1[redacted]"


def redact(text: str) -> str:
    return SECRET_PATHS.sub(REDACTED, text)


class RedactSecrets(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        return True


class RedactingAccessLog(access.AccessLogGenerator):
    def write_entry(self, host, date, request, status=None, length=None, ident=None, user=None):
        super().write_entry(host, date, redact(request), status, length, ident, user)


def install_access_log() -> None:
    # daphne.cli imports Daphne's server, which installs Twisted's reactor: only where it serves.
    from daphne import cli

    cli.AccessLogGenerator = RedactingAccessLog

"""No secret in a log: an invite link's token never reaches `var/log/`.

An invite link carries its sign-up token in its path, and paths are logged twice: by the access
log (every request, `qwenweb.access_log`) and by libraries that log the request (django-axes logs
`path_info` at each login). Both are log records, and every record goes through ``redact`` on its
way out: the ``RedactSecrets`` filter on the console handler (settings.LOGGING).
"""

from __future__ import annotations

import logging
import re

# The app's own URL patterns that carry a secret, with the part kept before it: an invite's token
# (chat/urls.py); the OIDC callback's whole query, its one-time code and state (qwenweb/urls.py).
SECRET_PATHS = re.compile(r"(/signup/invite/)[^/\s\"']+|(/oidc/callback/\?)[^\s\"']+")


def redact(text: str) -> str:
    return SECRET_PATHS.sub(lambda match: (match.group(1) or match.group(2)) + "[redacted]", text)


class RedactSecrets(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        return True

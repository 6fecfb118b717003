"""Start Daphne with the limits the settings name: `python -m qwenweb.serve --bind HOST --port PORT`.

Daphne's own WebSocket message cap (1 MiB by default) closes the socket with 1009 before the
consumer can name the app's limit, so every place that starts the web server (Procfile, test
stack, benches) goes through here and gets WEBSOCKET_MAX_MESSAGE_BYTES from the one setting.
Daphne's access log is off (verbosity 0): the app writes its own through logging, secrets
redacted (`qwenweb.access_log`). The web process's patches are installed as Daphne loads the app
(`qwenweb.asgi`). Before serving, answers the previous (dead) web process left 'streaming' are
marked interrupted.
"""

from __future__ import annotations

import logging
import os
import sys

import django
from django.conf import settings


def daphne_argv(arguments: list[str]) -> list[str]:
    size = str(settings.WEBSOCKET_MAX_MESSAGE_BYTES)
    app = settings.ASGI_APPLICATION.rsplit(".", 1)[0] + ":application"
    sizes = ["--websocket-max-message-size", size, "--websocket-max-frame-size", size]
    return [*arguments, "--verbosity", "0", *sizes, app]


log = logging.getLogger(__name__)


def mark_interrupted_answers() -> None:
    """Answers the previous web process was streaming when it died: incomplete, partial text kept.
    Only where this is the box's one web process (QWENWEB_SWEEP_ON_START)."""
    from chat.conversations.services import mark_orphaned_streams  # needs the app registry

    if settings.WEB_SWEEP_ON_START:
        count = mark_orphaned_streams(0)
        if count:
            log.warning("%d answers were interrupted by the last restart; marked incomplete", count)


def main() -> None:
    # Importing daphne's server installs Twisted's asyncio reactor: only in the process that serves.
    from daphne.cli import CommandLineInterface

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "qwenweb.settings")
    django.setup(set_prefix=False)
    from monitor.serving.queue import free_slots_of_gone_predecessors  # needs the app registry

    mark_interrupted_answers()
    free_slots_of_gone_predecessors("web")  # the previous (dead) web process's slots, not left to their leases
    CommandLineInterface().run(daphne_argv(sys.argv[1:]))


if __name__ == "__main__":
    main()

"""Start Daphne with the limits the settings name: `python -m qwenweb.serve --bind HOST --port PORT`.

Daphne's own WebSocket message cap (1 MiB by default) closes the socket with 1009 before the
consumer can name the app's limit, so every place that starts the web server (Procfile, test
stack, benches) goes through here and gets WEBSOCKET_MAX_MESSAGE_BYTES from the one setting.
"""

from __future__ import annotations

import os
import sys

import django
from django.conf import settings

from qwenweb import daphne_body_cap


def daphne_argv(arguments: list[str]) -> list[str]:
    size = str(settings.WEBSOCKET_MAX_MESSAGE_BYTES)
    return [
        *arguments,
        "--websocket-max-message-size",
        size,
        "--websocket-max-frame-size",
        size,
        settings.ASGI_APPLICATION.rsplit(".", 1)[0] + ":application",
    ]


def main() -> None:
    # Importing daphne's server installs Twisted's asyncio reactor: only in the process that serves.
    from daphne.cli import CommandLineInterface

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "qwenweb.settings")
    django.setup(set_prefix=False)
    daphne_body_cap.install()
    CommandLineInterface().run(daphne_argv(sys.argv[1:]))


if __name__ == "__main__":
    main()

"""Wait until the web server and llama-server answer, print the LAN URLs, then exit.

supervisord runs it once (``autorestart=false``); its output goes to `make run`'s terminal.
"""

import os
import socket
import time

import httpx
import psutil
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError


def lan_addresses() -> list[str]:
    """The box's IPv4 addresses other than loopback: where people on the LAN reach it."""
    return [
        entry.address
        for entries in psutil.net_if_addrs().values()
        for entry in entries
        if entry.family == socket.AF_INET and not entry.address.startswith("127.")
    ]


class Command(BaseCommand):
    help = "Print the LAN URLs once the stack is ready."

    def handle(self, *args, **options):
        port = os.environ.get("QWENWEB_PORT", "8000")
        checks = {
            "web": f"http://127.0.0.1:{port}/login/",
            "llama-server": settings.LLAMA_SERVER_URL.rstrip("/") + "/health",
        }
        pending = dict(checks)
        deadline = time.monotonic() + 600
        while pending and time.monotonic() < deadline:
            for name, url in list(pending.items()):
                try:
                    if httpx.get(url, timeout=2).status_code == 200:
                        pending.pop(name)
                except httpx.HTTPError:
                    pass
            time.sleep(0.5)
        if pending:
            raise CommandError(f"not ready after 10 minutes: {', '.join(pending)}")
        else:
            urls = [f"http://{address}:{port}/" for address in lan_addresses()] or [f"http://127.0.0.1:{port}/"]
            self.stdout.write("qwenweb is ready. Open on this LAN:\n" + "\n".join(f"    {url}" for url in urls))

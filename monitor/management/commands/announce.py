"""Wait until the web server and llama-server answer, print the LAN URLs, then exit.

supervisord runs it once (``autorestart=false``); its output goes to `make run`'s terminal.
"""

import time

import httpx
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = "Print the LAN URLs once the stack is ready."

    def handle(self, *args, **options):
        port = settings.QWENWEB_PORT
        checks = {
            "web": f"http://127.0.0.1:{port}/login/",
            "llama-server": settings.LLAMA_SERVER_URL.rstrip("/") + "/health",
        }
        pending = dict(checks)
        deadline = time.monotonic() + 600
        while pending and time.monotonic() < deadline:
            for name, url in list(pending.items()):
                try:
                    # Behind TLS the proxy's header is believed; without it Django redirects to https.
                    if httpx.get(url, headers={"X-Forwarded-Proto": "https"}, timeout=2).status_code == 200:
                        pending.pop(name)
                except httpx.HTTPError:
                    pass
            time.sleep(0.5)
        if pending:
            raise CommandError(f"not ready after 10 minutes: {', '.join(pending)}")
        else:
            addresses = settings.QWENWEB_LAN_ADDRESSES or ["127.0.0.1"]
            urls = [f"http://{address}:{port}/" for address in addresses]
            self.stdout.write("qwenweb is ready. Open on this LAN:\n" + "\n".join(f"    {url}" for url in urls))

"""Wait until the web server and llama-server answer, print the LAN URLs, then exit.

supervisord runs it once (``autorestart=false``); its output goes to `make run`'s terminal.
"""

import asyncio
import time

import httpx
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from monitor.llama.client import local_client
from monitor.llama.errors import LlamaError


def web_ready(port: int) -> bool:
    try:
        # Behind TLS the proxy's header is believed; without it Django redirects to https.
        answer = httpx.get(f"http://127.0.0.1:{port}/login/", headers={"X-Forwarded-Proto": "https"}, timeout=2)
    except httpx.HTTPError:
        return False
    return answer.status_code == 200


def llama_ready() -> bool:
    """This node's llama-server answers ``/health`` (through the one client: its key and CA file)."""
    try:
        asyncio.run(local_client().get_text("/health", timeout_s=2))
    except LlamaError:
        return False
    return True


class Command(BaseCommand):
    help = "Print the LAN URLs once the stack is ready."

    def handle(self, *args, **options):
        port = settings.QWENWEB_PORT
        pending = {"web": lambda: web_ready(port), "llama-server": llama_ready}
        deadline = time.monotonic() + 600
        while pending and time.monotonic() < deadline:
            pending = {name: ready for name, ready in pending.items() if not ready()}
            time.sleep(0.5)
        if pending:
            raise CommandError(f"not ready after 10 minutes: {', '.join(pending)}")
        addresses = settings.QWENWEB_LAN_ADDRESSES or ["127.0.0.1"]
        urls = [f"http://{address}:{port}/" for address in addresses]
        self.stdout.write("qwenweb is ready. Open on this LAN:\n" + "\n".join(f"    {url}" for url in urls))

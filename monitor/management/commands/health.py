"""The box's health from outside the web server: ``/healthz`` over HTTP, then every part directly.

A web process that hangs (stopped, deadlocked) cannot report itself; this command can,
so a boot service, a cron job or a person at the console sees it. Every part is printed, each
node's too; the exit status is /healthz's verdict: 0 when the web server and every required part
answer (a node that is down while what people use is served elsewhere prints DOWN and "degraded"),
1 otherwise.
"""

import os

import httpx
from django.core.management.base import BaseCommand, CommandError

from monitor.telemetry.health import Part, check_all, verdict


def check_web(url: str, timeout_s: float) -> Part:
    try:
        response = httpx.get(url, timeout=timeout_s)
    except httpx.HTTPError as error:
        return Part("web", False, f"{url}: {type(error).__name__}")
    return Part("web", response.status_code == 200, f"{url}: HTTP {response.status_code}")


class Command(BaseCommand):
    help = "Check /healthz over HTTP and every part directly; exit 1 when a required part is down."

    def add_arguments(self, parser):
        port = os.environ.get("QWENWEB_PORT", "8000")
        parser.add_argument("--url", default=f"http://127.0.0.1:{port}/healthz", help="the web server's /healthz")
        parser.add_argument("--timeout", type=float, default=3.0, help="seconds to wait for /healthz")

    def handle(self, *args, **options):
        parts = [check_web(options["url"], options["timeout"]), *check_all()]
        for part in parts:
            self.stdout.write(f"{'up  ' if part.ok else 'DOWN'} {part.name}: {part.detail}")
        if not verdict(parts):
            raise CommandError(f"down: {', '.join(part.name for part in parts if part.required and not part.ok)}")
        down = [part.name for part in parts if not part.ok]
        if down:
            self.stdout.write(f"degraded: {', '.join(down)}")

"""The dashboard's sampler of this node (QWENWEB_NODE_NAME): one long-lived process per node (supervisord
program ``sampler``; on the main box it also checks every node's heartbeat), or ``--once`` to print one sample."""

import asyncio
import contextlib

import orjson
from django.core.management.base import BaseCommand

from monitor.telemetry.sampler import one_sample, run_forever


class Command(BaseCommand):
    help = (
        "Sample this node's GPU, host and llama-server figures for the dashboard, every second while one is open"
        " (--once: print one as JSON)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true", help="print one sample as JSON and exit")

    def handle(self, *args, **options):
        if options["once"]:
            self.stdout.write(orjson.dumps(one_sample(), option=orjson.OPT_INDENT_2).decode())
            return
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(run_forever())

"""supervisord's event listener (``[eventlistener:events]``): part restarts onto the timeline."""

import sys

from django.core.management.base import BaseCommand

from monitor.telemetry.process_events import listen


class Command(BaseCommand):
    help = "Read supervisord's process state events on stdin and record exits and restarts on the timeline."

    def handle(self, *args, **options):
        listen(sys.stdin, sys.stdout)

"""This box's facts as a node (GPUs, RAM, CPU cores, llama-server build, models with SHA256) into its row: `make run`."""

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand

from monitor.llama.binary import llama_server_binary
from monitor.nodes import facts
from monitor.nodes.joining import register_local
from monitor.telemetry.gpu import detect_gpus


class Command(BaseCommand):
    help = "Register this box's facts as an inference node (its own node, named after the host)."

    def handle(self, *args, **options):
        found = facts.gather(Path(settings.MODELS_DIR), llama_server_binary(), Path(settings.VAR_DIR), detect_gpus())
        node = register_local(found)
        self.stdout.write(f"    node {node.name}: {facts.summary(found)}")

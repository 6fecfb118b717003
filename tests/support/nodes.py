"""A second inference box on this machine, for the pool's tests and benches: joined with the documented
command (`scripts/node.py`, what `make node` runs) and a join token, so it runs what a joined node runs
(its llama-server supervisor and router, its heartbeat, a worker that takes only its own queue, its
sampler) with its own name, var folder, port and keys, against the main box's Redis and database.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from tests.support.joined_node import NodeRun
from tests.support.stack import wait_until

START_S = 300  # a node's set-up and first heartbeat on a loaded 2-core box


class SecondNode:
    def __init__(self, run_dir: Path, name: str):
        from django.conf import settings

        folder = run_dir / name
        folder.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.run = NodeRun(folder, name, Path(settings.MODELS_DIR) / settings.DEFAULT_MODEL_FILE)

    def start(self) -> None:
        from monitor.nodes import readiness
        from monitor.nodes.joining import create_token

        _row, token = create_token(None, note=f"{self.name} (tests)")
        self.run.start(token)
        wait_until(
            lambda: readiness.beats([self.name])[self.name], START_S, f"{self.name}'s heartbeat",
            self.run.process, self.run.console_path,
        )  # fmt: skip

    @property
    def url(self) -> str:
        from monitor.models import Node

        return Node.objects.get(name=self.name).url

    @property
    def key(self) -> str:
        from monitor.models import Node

        return Node.objects.get(name=self.name).api_key

    def router_pid(self) -> int | None:
        from monitor.router.supervisor import read_pid

        return read_pid(self.run.var_dir / "run" / "llama-router.pid")

    def kill_router(self) -> None:
        """SIGKILL its llama-server router (its supervisor starts a new one, as on a real box)."""
        os.kill(self.router_pid(), signal.SIGKILL)

    def stop(self) -> None:
        from monitor.models import Node
        from monitor.nodes import joining

        self.run.stop()
        node = Node.objects.filter(name=self.name).first()
        if node is not None:
            joining.remove(node)

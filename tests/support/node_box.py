"""A second inference box on this machine, whole as the staff view sees it: what a joined box runs.

``SecondNode`` (tests/support/nodes.py) runs its real llama-server supervisor (its router, its heartbeat)
with its own node name, var folder and key against the main box's Redis and database; this adds its own
sampler (``manage.py run_sampler``), so the dashboard shows its real figures. ``freeze`` stops every
process of the box (SIGSTOP: a box that stops answering, its keys left to run out) and ``thaw`` lets
them go on (the box answers again).
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from monitor.models import MetricMinute, Node
from monitor.nodes import readiness
from monitor.redis_clients import sync_client
from monitor.telemetry.live import live_key
from monitor.telemetry.node_status import STATE_KEY
from tests.support.nodes import SecondNode
from tests.support.stack import ROOT, Service, wait_until


class NodeBox:
    def __init__(self, run_dir: Path, name: str):
        self.node = SecondNode(run_dir, name)
        self.name = name
        manage = [sys.executable, str(ROOT / "manage.py")]
        self.sampler = Service(f"sampler-{name}", [*manage, "run_sampler"], run_dir, self.node.env)
        self.frozen = False

    def start(self) -> None:
        """Registered as a node, its supervisor beating and its sampler sampling."""
        self.node.register()
        supervisor = self.node.supervisor
        supervisor.start()
        wait_until(self.node.router_answers, 120, f"{self.name}'s router", supervisor.process, supervisor.log_path)
        wait_until(lambda: readiness.beats([self.name])[self.name], 30, f"{self.name}'s heartbeat")
        self.sampler.start()
        has_sample = lambda: sync_client().llen(live_key(self.name)) > 0  # noqa: E731
        wait_until(has_sample, 60, f"{self.name}'s sampler", self.sampler.process, self.sampler.log_path)

    def _signal(self, number: int) -> None:
        for service in (self.node.supervisor, self.sampler):
            if service.running:
                os.killpg(service.process.pid, number)  # the supervisor's group holds its router

    def freeze(self) -> None:
        self._signal(signal.SIGSTOP)
        self.frozen = True

    def thaw(self) -> None:
        self._signal(signal.SIGCONT)
        self.frozen = False

    def stop(self) -> None:
        """Stopped and gone: its processes, its keys, what the main box remembered of it, its node, its history."""
        self.thaw()
        self.sampler.stop()
        self.node.supervisor.stop()
        readiness.withdraw_node(self.name)
        sync_client().delete(live_key(self.name))
        sync_client().hdel(STATE_KEY, self.name)
        Node.objects.filter(name=self.name).delete()
        MetricMinute.objects.filter(node=self.name).delete()  # the minute rows its sampler wrote

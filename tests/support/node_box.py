"""A second inference box on this machine, whole as the staff view sees it, frozen and let go on.

``SecondNode`` (tests/support/nodes.py) joins it as a person does (`make node` with a join token): its
llama-server supervisor and router, heartbeat, worker and sampler, under supervisord, with its own node
name, var folder and keys. ``freeze`` stops every process of that run (SIGSTOP: a box that stops
answering, its keys left to run out); ``thaw`` lets them go on (the box answers again).
"""

from __future__ import annotations

from pathlib import Path

import psutil

from monitor.models import MetricMinute
from monitor.redis_clients import sync_client
from monitor.telemetry.live import live_key
from monitor.telemetry.node_status import STATE_KEY
from scripts.leftovers import processes_of_run
from tests.support.nodes import SecondNode
from tests.support.stack import wait_until


class NodeBox:
    def __init__(self, run_dir: Path, name: str):
        self.node = SecondNode(run_dir, name)
        self.name = name

    def start(self) -> None:
        """Joined, beating, and its sampler sampling."""
        self.node.start()
        has_sample = lambda: sync_client().llen(live_key(self.name)) > 0  # noqa: E731
        wait_until(has_sample, 120, f"{self.name}'s sampler", self.node.run.process, self.node.run.console_path)

    def _processes(self) -> list[psutil.Process]:
        processes = [leftover.process for leftover in processes_of_run(self.node.run.var_dir)]
        for process in list(processes):
            try:
                processes += process.children(recursive=True)  # a program's own children: llama's router
            except psutil.Error:
                continue
        return list({process.pid: process for process in processes}.values())

    def freeze(self) -> None:
        for process in self._processes():
            process.suspend()

    def thaw(self) -> None:
        for process in self._processes():
            try:
                process.resume()
            except psutil.Error:
                continue

    def stop(self) -> None:
        """Stopped and removed (the join flow's removal), and what the staff view kept of it."""
        self.thaw()
        self.node.stop()
        sync_client().delete(live_key(self.name))
        sync_client().hdel(STATE_KEY, self.name)
        MetricMinute.objects.filter(node=self.name).delete()  # the minute rows its sampler wrote

"""A STAND-IN for a second inference box, for what a real one on this machine cannot show.

A real second box runs here (tests/support/node_box.py), but its name is a slug and it has no NVIDIA
GPU: the dashboard's rendering of hostile node names, GPU names and served ids, and of a node's GPUs,
needs values no real box here can have. This writes into the test stack's real Redis what a second
box's own processes would: its heartbeat and what it serves (``readiness.publish``, the very function
its llama-server supervisor calls every ``HEARTBEAT_S``) and, when given, its sampler's newest sample
under its node's key. Stopping it leaves the keys to run out, as a box that dies does. Everything that
reads them (the dashboard socket and page) is the real thing.
"""

from __future__ import annotations

import threading
import time

import orjson

from monitor.nodes import readiness
from monitor.redis_clients import sync_client
from monitor.telemetry.live import live_key
from monitor.telemetry.node_status import STATE_KEY


class StandInNode:
    def __init__(self, name: str, serving: dict[str, tuple[int, str]], sample: dict | None = None):
        self.name = name
        self.serving = serving
        self.sample = sample
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Beat now and every HEARTBEAT_S until ``stop``."""
        self._stop.clear()
        self.beat()
        self._thread = threading.Thread(target=self._run, name=f"stand-in {self.name}", daemon=True)
        self._thread.start()

    def beat(self) -> None:
        readiness.publish(self.name, self.serving, router=True)
        if self.sample is not None:
            sample = {**self.sample, "t": time.time(), "node": self.name}
            sync_client().pipeline().lpush(live_key(self.name), orjson.dumps(sample)).ltrim(
                live_key(self.name), 0, 9
            ).execute()

    def _run(self) -> None:
        while not self._stop.wait(readiness.HEARTBEAT_S):
            self.beat()

    def stop(self) -> None:
        """No more beats: its keys run out within READY_TTL_S, as a dead box's do."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def remove(self) -> None:
        """Gone for good: its keys and what the main box remembered of it."""
        self.stop()
        readiness.withdraw_node(self.name)
        sync_client().delete(live_key(self.name))
        sync_client().hdel(STATE_KEY, self.name)

"""What each node has for a model: its GPUs' free VRAM and its available RAM, for the planner.

From the node's sampler's newest sample while it is fresh: what is free now, so the models it has
loaded count against it. Otherwise from what the node registered (its start, ``facts.py``): its
totals, with nothing loaded counted; the planner page says which. A node with several GPUs is planned as
one pool of their free VRAM (llama.cpp splits the layers across them by default, ``--split-mode
layer``), less a CUDA runtime for every GPU beyond the first: each holds its own.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import psutil

from monitor.catalog.planner import GPU_RUNTIME_BYTES
from monitor.models import Node

# A sample older than this is not what the node has now (its sampler stopped, or it is down).
SAMPLE_FRESH_S = 60.0


@dataclass(frozen=True)
class Gpu:
    name: str
    total_bytes: int
    free_bytes: int


@dataclass
class Capacity:
    node: Node
    gpus: list[Gpu] = field(default_factory=list)
    ram_total: int = 0
    ram_available: int = 0
    live: bool = False  # True: from a fresh sample (free now); False: the registered totals
    gpu_note: str = ""  # why the node has no GPU, as it said

    @property
    def has_gpu(self) -> bool:
        return bool(self.gpus)

    @property
    def free_vram(self) -> int | None:
        """The VRAM a plan may use on this node (None: it has no GPU)."""
        if not self.gpus:
            return None
        free = sum(gpu.free_bytes for gpu in self.gpus)
        return max(free - GPU_RUNTIME_BYTES * (len(self.gpus) - 1), 0)


def _number(value) -> int:
    return int(value) if isinstance(value, (int, float)) and value > 0 else 0


def _from_sample(node: Node, sample: dict) -> Capacity:
    host, gpu = sample.get("host") or {}, sample.get("gpu") or {}
    gpus = [
        Gpu(str(item.get("name") or "?")[:100], _number(item.get("total_bytes")),
            max(_number(item.get("total_bytes")) - _number(item.get("used_bytes")), 0))
        for item in gpu.get("gpus") or [] if isinstance(item, dict)
    ]  # fmt: skip
    total = _number(host.get("ram_total_bytes")) or _number(node.facts.get("ram_bytes"))
    available = max(total - _number(host.get("ram_used_bytes")), 0)
    return Capacity(node, gpus, total, available, True, "" if gpus else str(gpu.get("reason") or "")[:300])


def _from_facts(node: Node) -> Capacity:
    facts = node.facts if isinstance(node.facts, dict) else {}
    gpus = [
        Gpu(str(item.get("name") or "?")[:100], _number(item.get("total_bytes")), _number(item.get("total_bytes")))
        for item in facts.get("gpus") or [] if isinstance(item, dict)
    ]  # fmt: skip
    ram = _number(facts.get("ram_bytes"))
    return Capacity(node, gpus, ram, ram, False, "" if gpus else str(facts.get("gpu_note") or "")[:300])


def capacity_of(node: Node, sample: dict | None = None, now: float | None = None) -> Capacity:
    """The node's capacity from its newest sample while fresh, else from its registered facts."""
    fresh = isinstance(sample, dict) and (now or time.time()) - float(sample.get("t") or 0) <= SAMPLE_FRESH_S
    return _from_sample(node, sample) if fresh else _from_facts(node)


def measured_here(gpus: list, gpu_problem: str) -> dict:
    """This box's capacity now, as a sample says it (``gpus``, ``gpu_problem``: what
    ``monitor.telemetry.gpu.detect_gpus`` found): the web process can read its own box directly."""
    memory = psutil.virtual_memory()
    return {
        "t": time.time(),
        "host": {"ram_total_bytes": memory.total, "ram_used_bytes": memory.total - memory.available},
        "gpu": {
            "reason": gpu_problem,
            "gpus": [
                {"name": g.name, "total_bytes": g.total_bytes, "used_bytes": g.total_bytes - g.free_bytes} for g in gpus
            ],
        },
    }

"""The planner per node: one model and settings planned on every node from that node's own free VRAM
and RAM (``capacity.py``), whether it fits there as asked, and what to run there (GPU layers, context,
MoE layers on the CPU); whether the node holds the file; whether the profile planned is placed on it."""

from __future__ import annotations

from dataclasses import dataclass

from monitor.catalog.advice import BoxFit, fit_on_box
from monitor.catalog.download_jobs import files_on
from monitor.catalog.planner import PlanRequest
from monitor.catalog.registry import ModelInfo
from monitor.models import Node, ServerProfile
from monitor.nodes.capacity import Capacity, capacity_of
from monitor.nodes.model_files import file_state
from monitor.nodes.registry import this_node


@dataclass
class NodePlan:
    capacity: Capacity
    fit: BoxFit
    file: str  # model_files.PRESENT, MISSING or DIFFERENT
    serves: bool  # the profile planned is placed on this node

    @property
    def node(self) -> Node:
        return self.capacity.node


def node_plans(
    model: ModelInfo, file_name: str, request: PlanRequest, *, margin: int, ram_margin: int,
    samples: dict[str, dict | None] | None = None, profile: ServerProfile | None = None,
) -> list[NodePlan]:  # fmt: skip
    """``request`` for the model ``file_name`` (relative to the models folder) on every node; ``samples``:
    each node's newest sample where the caller has them (else the nodes' registered totals)."""
    placed = set(profile.placements.values_list("node_id", flat=True)) if profile is not None else set()
    reference = files_on(this_node()).get(file_name, "")
    plans = []
    for node in Node.objects.all():
        capacity = capacity_of(node, (samples or {}).get(node.name))
        fit = fit_on_box(model, request, capacity.free_vram, capacity.ram_available, margin, ram_margin)
        plans.append(NodePlan(capacity, fit, file_state(files_on(node), file_name, reference), node.pk in placed))
    return plans

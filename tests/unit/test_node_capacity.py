"""What a node has for a plan: its sampler's newest figures while fresh (free now), else its registered
totals; several GPUs as one pool less a CUDA runtime for each beyond the first; no GPU said as such."""

from monitor.catalog.planner import GIB, GPU_RUNTIME_BYTES
from monitor.models import Node
from monitor.nodes.capacity import SAMPLE_FRESH_S, capacity_of

FACTS = {
    "gpus": [{"index": 0, "name": "A", "total_bytes": 24 * GIB}, {"index": 1, "name": "B", "total_bytes": 16 * GIB}],
    "gpu_note": "",
    "ram_bytes": 64 * GIB,
}
NOW = 1_000_000.0


def sample(age_s: float, gpus: list[tuple[int, int]], ram: tuple[int, int], reason: str = "") -> dict:
    return {
        "t": NOW - age_s,
        "host": {"ram_total_bytes": ram[0], "ram_used_bytes": ram[1]},
        "gpu": {"reason": reason, "gpus": [{"name": "A", "total_bytes": t, "used_bytes": u} for t, u in gpus]},
    }


def test_registered_totals_without_a_sample():
    capacity = capacity_of(Node(name="n", facts=FACTS), None, NOW)
    assert not capacity.live and capacity.ram_available == 64 * GIB
    assert [gpu.free_bytes for gpu in capacity.gpus] == [24 * GIB, 16 * GIB]
    assert capacity.free_vram == 40 * GIB - GPU_RUNTIME_BYTES  # the second card holds its own runtime


def test_a_fresh_sample_says_what_is_free_now():
    fresh = sample(5, [(24 * GIB, 20 * GIB)], (64 * GIB, 60 * GIB))
    capacity = capacity_of(Node(name="n", facts=FACTS), fresh, NOW)
    assert capacity.live and capacity.free_vram == 4 * GIB and capacity.ram_available == 4 * GIB


def test_a_stale_sample_is_not_used():
    stale = sample(SAMPLE_FRESH_S + 1, [(24 * GIB, 20 * GIB)], (64 * GIB, 60 * GIB))
    assert not capacity_of(Node(name="n", facts=FACTS), stale, NOW).live


def test_a_box_without_a_gpu_says_why():
    facts = {"gpus": [], "gpu_note": "NVML Shared Library Not Found", "ram_bytes": 8 * GIB}
    capacity = capacity_of(Node(name="n", facts=facts), None, NOW)
    assert not capacity.has_gpu and capacity.free_vram is None and capacity.gpu_note == facts["gpu_note"]
    live = capacity_of(Node(name="n", facts=facts), sample(1, [], (8 * GIB, 1 * GIB), "no driver"), NOW)
    assert live.free_vram is None and live.gpu_note == "no driver" and live.ram_available == 7 * GIB


def test_hostile_facts_are_read_as_nothing():
    facts = {"gpus": [{"name": "<b>x</b>", "total_bytes": "lots"}, "junk"], "ram_bytes": -5}
    capacity = capacity_of(Node(name="n", facts=facts), None, NOW)
    assert [gpu.total_bytes for gpu in capacity.gpus] == [0] and capacity.ram_available == 0

"""Compute buffers from llama.cpp's graphs (ggml's allocator replayed) and the RAM plan, without a server.

The figures are what the pinned llama-server printed for the same settings ("CPU compute buffer
size", "RS buffer size", "created context checkpoint ... size"); bench/planner_bench.py measures
them again live over the whole matrix, tests/integration/test_planner_architectures.py on a few.
"""

import dataclasses

import pytest

from monitor.catalog import ggml_graph as g
from monitor.catalog.advice import ram_advice
from monitor.catalog.ggml_alloc import reserve
from monitor.catalog.planner import GIB, MIB, PlanRequest, plan
from monitor.catalog.registry import read_model_info
from tests.support.real_scale import QWEN36_35B_A3B
from tests.support.synthetic_gguf import Q8_0, write_model


def test_the_allocator_reuses_parents_in_place_and_freed_blocks():
    gf = g.Graph()
    x = g.input_tensor("f32", 256)  # 1 KiB
    chain = x
    for _ in range(3):  # element-wise ops on a tensor nobody else reads: each takes its parent's block
        chain = g.binary(chain, g.weight("f32", 256), "MUL")
    y = g.mul_mat(g.weight("f32", 256, 512), chain)  # 2 KiB, beside the chain's block
    z = g.mul_mat(g.weight("f32", 512, 256), y)  # 1 KiB: the chain's freed block fits it
    gf.expand(z)
    assert reserve(gf) == 1024 + 2048


@pytest.fixture(scope="module")
def a3b(tmp_path_factory):
    """The bench's 35B-A3B shape: the released model's 40 layers and attention/DeltaNet/router sizes, experts 32 wide."""
    shape = dataclasses.replace(QWEN36_35B_A3B, n_ff_exp=32, expert_type=Q8_0, tied_output=True)
    return read_model_info(write_model(tmp_path_factory.mktemp("a3b") / "a3b.gguf", shape, sparse=True))


@pytest.mark.parametrize(
    "settings, llama_mib",
    [
        (dict(ctx_size=131072, cache_type_k="q8_0", cache_type_v="q8_0"), 182.29),
        (dict(ctx_size=16384, parallel=4, cache_type_k="q4_0", cache_type_v="q4_0", ubatch=256), 48.65),
        (dict(ctx_size=8192, ubatch=2048), 242.09),
        (dict(ctx_size=65536, parallel=2, cache_type_k="q8_0", cache_type_v="q8_0", ubatch=1024), 172.31),
        (dict(ctx_size=32768, parallel=2, mtp=True), 144.23),  # target and MTP draft contexts
        (dict(ctx_size=65536, cache_type_k="q8_0", cache_type_v="q8_0", ubatch=1024, mtp=True), 448.35),
    ],
)
def test_compute_buffers_of_the_35b_a3b_shape_are_llama_servers(a3b, settings, llama_mib):
    planned = plan(a3b, PlanRequest(**settings))
    assert planned.compute_source == "graph"
    assert round(planned.compute_cpu / MIB, 2) == llama_mib


def test_ram_plan_counts_the_prompt_cache_checkpoints_and_lowers_them_in_order(a3b):
    request = PlanRequest(ctx_size=65536, parallel=2, gpu_layers=a3b.n_layer + 1, cpu_moe_layers=40)
    planned = plan(a3b, request)
    # Each checkpoint keeps a sequence's recurrent state: 30 DeltaNet layers, 62.81 MiB as llama-server logs.
    assert round(planned.checkpoint_bytes / MIB, 2) == 62.81
    assert planned.ram_items["checkpoints"] == 32 * 2 * planned.checkpoint_bytes
    assert planned.ram_items["prompt_cache"] == 8192 * MIB  # --cache-ram's default cap
    assert planned.ram_items["weights"] == a3b.input_bytes + sum(a3b.layer_expert_bytes[:40])
    roomy = ram_advice(a3b, request, available=planned.ram + 3 * GIB, margin=2 * GIB)
    assert roomy.fits and not roomy.changes
    # 6 GiB short: the prompt cache goes first, down to the 2 GiB left of it.
    tight = ram_advice(a3b, request, available=planned.ram - 4 * GIB, margin=2 * GIB)
    assert not tight.fits and tight.short == 0
    assert [(c.option, c.current, c.suggested) for c in tight.changes] == [("--cache-ram", 8192, 2048)]
    # Without a prompt cache to give, checkpoints, then slots (on the CPU, each holds its recurrent state).
    bare = dataclasses.replace(request, cache_ram_mib=0, gpu_layers=0, cpu_moe_layers=0)
    tighter = ram_advice(a3b, bare, available=plan(a3b, bare).ram - planned.checkpoints - 20 * MIB, margin=0)
    assert [(c.option, c.suggested) for c in tighter.changes] == [("--ctx-checkpoints", 0), ("--parallel", 1)]
    assert tighter.short == 0 and tighter.changes[1].saves > 20 * MIB  # a slot's state, less a larger mask

"""The planner against the real llama-server for each covered architecture.

Small GGUF files are generated (zero weights, real metadata keys and tensor
shapes) and loaded at a few settings; every weight, KV, recurrent-state and
compute-buffer figure must match the buffer sizes llama-server logs (to its
0.01 MiB print, within 1%).
The big matrix lives in bench/planner_bench.py.
"""

import re

import pytest
from gguf import GGUFWriter

from monitor.catalog.gguf_header import read_header
from monitor.catalog.layers import ATTENTION, MTP, RECURRENT
from monitor.catalog.planner import MIB, PlanRequest, plan
from monitor.catalog.registry import CPU_MOE_TENSOR, read_model_info
from tests.support.planner_check import Case, compare, load_log
from tests.support.synthetic_gguf import Shape, write_model
from tests.support.synthetic_mmproj import write_projector

MATRIX = {
    # hybrid MoE with an MTP block: KV on the attention layers only, recurrent state per slot,
    # MTP weights + draft context + rollback snapshots only with --spec-type draft-mtp; compute
    # buffers (the target's and the draft's) from llama.cpp's graphs replayed
    "qwen35moe": (
        Shape("qwen35moe", nextn=1),
        [Case(1000, 2, "q8_0"), Case(1000, 3, "q4_0", cpu_moe=2, mtp=True), Case(2048, 2, "f16", ubatch=256)],
    ),
    "qwen3next": (Shape("qwen3next"), [Case(2048, 1, "f16")]),
    "qwen3moe": (Shape("qwen3moe"), [Case(1300, 3, "q8_0", cpu_moe=1)]),
    "llama": (Shape("llama"), [Case(513, 2, "f16")]),
}


@pytest.mark.parametrize("arch", list(MATRIX))
def test_planner_matches_llama_server(arch, tmp_path):
    shape, cases = MATRIX[arch]
    path = write_model(tmp_path / f"{arch}.gguf", shape)
    rows = [row for row in compare(path, cases) if row["counted"]]
    figures = {row["figure"] for row in rows}
    assert {"weights", "kv_cache"} <= figures and ("recurrent" in figures) == (arch in ("qwen35moe", "qwen3next"))
    worst = max(rows, key=lambda row: row["error_pct"])
    assert worst["error_pct"] <= 1, worst


def test_hybrid_layers_are_read_from_the_header(tmp_path):
    info = read_model_info(write_model(tmp_path / "m.gguf", Shape("qwen35moe", n_layer=8, nextn=1)))
    assert info.layer_kinds == [RECURRENT] * 3 + [ATTENTION] + [RECURRENT] * 3 + [ATTENTION] + [MTP]
    assert (info.trunk_layers, info.nextn_layers, info.recurrent_layers) == (8, 1, 6)
    assert info.covered and info.is_moe and info.has_shared_experts
    off = plan(info, PlanRequest(ctx_size=4096))
    on = plan(info, PlanRequest(ctx_size=4096, mtp=True))
    mtp_row = off.rows[-2]
    assert mtp_row.kind == MTP and not mtp_row.loaded and mtp_row.weights_cpu == 0 and mtp_row.kv == 0
    assert on.rows[-2].weights_cpu == info.layer_bytes[-1] and on.rows[-2].kv > 0
    # Only the two attention layers hold KV; recurrent state grows with slots, not context.
    assert [row.kv > 0 for row in off.rows[1:-2]] == [kind == ATTENTION for kind in info.layer_kinds[:-1]]
    assert plan(info, PlanRequest(ctx_size=65536)).recurrent_total == off.recurrent_total
    assert plan(info, PlanRequest(ctx_size=4096, parallel=2)).recurrent_total == 2 * off.recurrent_total


def test_unknown_architecture_is_shown_as_such(tmp_path):
    info = read_model_info(write_model(tmp_path / "m.gguf", Shape("qwen3", extra={})))
    assert info.covered
    path = write_model(tmp_path / "odd.gguf", Shape("llama"))
    data = path.read_bytes().replace(b"llama", b"zzzzz")  # an architecture llama.cpp's rules here do not cover
    path.write_bytes(data)
    odd = read_model_info(path)
    assert odd.architecture == "zzzzz" and not odd.covered
    assert not plan(odd, PlanRequest(ctx_size=4096)).covered
    assert sum(odd.layer_bytes) > MIB  # weights are still exact: they come from the tensor table


def test_n_cpu_moe_moves_exactly_the_tensors_llama_cpp_overrides(tmp_path):
    """The planner's --n-cpu-moe set equals the tensors llama.cpp's override regex sends to the CPU
    (its debug log names each one); 12 blocks, so blk.1 must not catch blk.10 and blk.11."""
    path = write_model(tmp_path / "moe.gguf", Shape("qwen3moe", n_layer=12))
    log_text = load_log(path, Case(1024, cpu_moe=2, gpu_layers=13), extra=("--verbose",))
    overridden = set(re.findall(r"tensor (\S+) \(.*\) buffer type overridden to CPU", log_text))
    ours = {
        t.name for t in read_header(path).tensors if CPU_MOE_TENSOR.search(t.name) and int(t.name.split(".")[1]) < 2
    }
    assert overridden == ours and len(ours) == 6
    info = read_model_info(path)
    planned = plan(info, PlanRequest(ctx_size=1024, cpu_moe_layers=2, gpu_layers=13))
    assert planned.weights_cpu == info.input_bytes + sum(info.layer_expert_bytes[:2])


def _projector(path, width: int):
    writer = GGUFWriter(str(path), "clip")
    writer.add_uint32("clip.vision.projection_dim", width)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    writer.close()


def test_vision_projector_pairs_only_with_a_model_of_its_width(tmp_path):
    write_model(tmp_path / "qwen35-small.gguf", Shape("qwen35"))  # n_embd 128
    _projector(tmp_path / "mmproj-other-F16.gguf", 4096)
    assert read_model_info(tmp_path / "qwen35-small.gguf").mmproj is None  # a wrong width is never paired
    _projector(tmp_path / "mmproj-qwen35-small-F16.gguf", 128)
    assert read_model_info(tmp_path / "qwen35-small.gguf").mmproj.name == "mmproj-qwen35-small-F16.gguf"


def test_a_vision_projector_is_planned_as_mtmd_loads_it(tmp_path):
    """Its weights (clip's "model size") and the warm-up compute buffer mtmd reserves, counted when loaded."""
    path = write_model(tmp_path / "qwen35moe-small.gguf", Shape("qwen35moe", nextn=1))
    projector = write_projector(tmp_path / "mmproj-qwen35moe-small-F16.gguf", 128, n_embd=128, n_ff=512, layers=3)
    log_text = load_log(path, Case(2048), extra=("--mmproj", str(projector)))
    weights = float(re.search(r"load_hparams: model size:\s+([\d.]+) MiB", log_text).group(1))
    work = float(re.search(r"reserve_compute_meta:\s+CPU compute buffer size =\s+([\d.]+) MiB", log_text).group(1))
    info = read_model_info(path)
    assert info.mmproj == projector
    planned = plan(info, PlanRequest(ctx_size=2048, vision=True))
    assert round(planned.projector_cpu / MIB, 2) == pytest.approx(weights + work, abs=0.02)
    assert plan(info, PlanRequest(ctx_size=2048)).projector_cpu == 0  # not loaded: not counted

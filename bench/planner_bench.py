"""Planner error per architecture and setting against the buffer sizes the real llama-server prints.

Generated GGUF files of each covered architecture (zero weights, real metadata and tensor
shapes) and the default Gemma 3 model are loaded at many settings: contexts that are and
are not multiples of 256, 1-3 slots, f16/q8_0/q4_0 cache, --n-cpu-moe, MTP on/off. Then a
Qwen3.6-35B-A3B-shaped ``qwen35moe`` (the released model's 40 layers, attention, DeltaNet,
router and vocabulary sizes; experts 32 wide so that the file stays small, its data a hole)
over a matrix of context, micro-batch, slots, KV types, --n-cpu-moe and MTP.

Prints a table per architecture, then
  planner_max_error_pct=             weights, KV and recurrent state (target <= 1)
  planner_compute_error_pct=         the planner's compute buffers (llama.cpp's graphs replayed), every architecture
  planner_compute_llama_error_pct=   llama.cpp's own fit-step projection (whole MiB), for the record
  planner_hybrid_compute_error_pct=  the planner's compute buffers (target and MTP draft contexts) on the
                                     35B-A3B shape, largest error over its matrix (target <= 10)
"""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support import stack  # noqa: E402

SCALE = dict(
    n_embd=512, n_head=8, n_head_kv=2, head_dim=64, n_ff=1536, n_vocab=32000,
    n_ff_exp=256, n_ff_shexp=256, ssm_state=64, ssm_groups=4, ssm_v_heads=8,
)  # fmt: skip


def matrix():
    from tests.support.planner_check import CASES, Case
    from tests.support.synthetic_gguf import Shape

    common = [Case(1000, 1, "f16"), Case(4096, 2, "q8_0"), Case(5000, 3, "q4_0"), Case(16384, 1, "q8_0")]
    moe = [Case(2048, 2, "f16", cpu_moe=3), Case(8192, 1, "q8_0", cpu_moe=8)]
    mtp = [Case(1000, 2, "q8_0", mtp=True), Case(8192, 3, "f16", mtp=True), Case(3000, 1, "q4_0", cpu_moe=4, mtp=True)]
    return {
        "qwen35moe": (Shape("qwen35moe", nextn=1, **SCALE), common + moe + mtp),
        "qwen35": (Shape("qwen35", nextn=1, **SCALE), common + mtp[:2]),
        "qwen3next": (Shape("qwen3next", **SCALE), common + moe),
        "qwen3moe": (Shape("qwen3moe", **SCALE), common + moe),
        "qwen3": (Shape("qwen3", **SCALE), common),
        "llama": (Shape("llama", **SCALE), common),
        "gemma3": (None, CASES),
    }


def hybrid_matrix():
    """The 35B-A3B shape: context, micro-batch, slots, KV types, --n-cpu-moe and MTP."""
    from tests.support.planner_check import Case

    return [
        Case(131072, 1, "q8_0"), Case(16384, 4, "q4_0", ubatch=256),
        Case(8192, 1, "f16", ubatch=2048), Case(65536, 2, "q8_0", ubatch=1024), Case(32768, 1, "q8_0", cpu_moe=20),
        Case(32768, 2, "f16", mtp=True), Case(65536, 1, "q8_0", mtp=True, ubatch=1024),
    ]  # fmt: skip


def a3b_path(run_dir: Path) -> Path:
    from tests.support.real_scale import QWEN36_35B_A3B
    from tests.support.synthetic_gguf import Q8_0, write_model

    shape = dataclasses.replace(QWEN36_35B_A3B, n_ff_exp=32, expert_type=Q8_0, tied_output=True)
    return write_model(run_dir / "Qwen3.6-35B-A3B-shaped.gguf", shape, sparse=True)


def print_rows(title: str, rows: list[dict]) -> None:
    print(f"\n== {title}")
    print(
        f"{'ctx':>6} {'slots':>5} {'cache':>5} {'ubatch':>6} {'ncmoe':>5} {'mtp':>3} {'figure':<14} {'llama MiB':>10} {'planner MiB':>12} {'error %':>8}"
    )
    for row in rows:
        print(
            f"{row['ctx']:>6} {row['parallel']:>5} {row['cache']:>5} {row['ubatch']:>6} {row['cpu_moe']:>5} "
            f"{'on' if row['mtp'] else '':>3} {row['figure']:<14} {row['llama_mib']:>10.2f} {row['planner_mib']:>12.2f} "
            f"{row['error_pct']:>8.2f}"
        )


def main() -> None:
    stack.end_on_signals()
    run_dir = stack.new_run_dir("qwenweb-bench-planner-")
    stack.configure_environment(run_dir)
    from tests.support.planner_check import compare
    from tests.support.synthetic_gguf import write_model

    sizes, compute, compute_llama = [], [], []
    loads = 0
    for arch, (shape, cases) in matrix().items():
        if shape is None:
            path = Path(os.environ["QWENWEB_MODELS_DIR"]) / "gemma-3-270m-q4_k_m.gguf"
        else:
            path = write_model(run_dir / f"{arch}.gguf", shape)
        rows = compare(path, cases)
        loads += len(cases)
        print_rows(f"{arch} ({path.name})", rows)
        for row in rows:
            target = {"compute": compute, "compute_llama": compute_llama}.get(row["figure"], sizes)
            target.append(row["error_pct"])
    path = a3b_path(run_dir)
    try:
        rows = compare(path, hybrid_matrix())
    finally:
        path.unlink()
    loads += len(hybrid_matrix())
    print_rows(f"qwen35moe, 35B-A3B shape ({path.name})", rows)
    hybrid = [row["error_pct"] for row in rows if row["figure"] == "compute"]
    sizes += [row["error_pct"] for row in rows if row["counted"] and row["figure"] != "compute"]
    print(f"\nloads={loads}")
    print(f"planner_max_error_pct={max(sizes):.2f}")
    print(f"planner_compute_error_pct={max(compute + hybrid):.2f}")
    print(f"planner_compute_llama_error_pct={max(compute_llama):.2f}")
    print(f"planner_hybrid_compute_error_pct={max(hybrid):.2f}")


if __name__ == "__main__":
    main()

"""Planner error per architecture and setting against the buffer sizes the real llama-server prints.

Generated GGUF files of each covered architecture (zero weights, real metadata and tensor
shapes) and the default Gemma 3 model are loaded at many settings: contexts that are and
are not multiples of 256, 1-3 slots, f16/q8_0/q4_0 cache, --n-cpu-moe, MTP on/off.

Prints a table per architecture, then
  planner_max_error_pct=            weights, KV and recurrent state (target <= 1)
  planner_compute_error_pct=        compute buffers as the page shows them from llama.cpp's
                                    fit-step projection (whole MiB; target <= 10)
  planner_compute_estimate_error_pct=  the fallback formula, for the record
"""

from __future__ import annotations

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


def main() -> None:
    run_dir = stack.new_run_dir("qwenweb-bench-planner-")
    stack.configure_environment(run_dir)
    from tests.support.planner_check import compare
    from tests.support.synthetic_gguf import write_model

    counted, compute_llama, compute_estimate = [], [], []
    for arch, (shape, cases) in matrix().items():
        if shape is None:
            path = Path(os.environ["QWENWEB_MODELS_DIR"]) / "gemma-3-270m-q4_k_m.gguf"
        else:
            path = write_model(run_dir / f"{arch}.gguf", shape)
        rows = compare(path, cases)
        print(f"\n== {arch} ({path.name})")
        print(
            f"{'ctx':>6} {'slots':>5} {'cache':>5} {'ncmoe':>5} {'mtp':>3} {'figure':<14} {'llama MiB':>10} {'planner MiB':>12} {'error %':>8}"
        )
        for row in rows:
            print(
                f"{row['ctx']:>6} {row['parallel']:>5} {row['cache']:>5} {row['cpu_moe']:>5} {'on' if row['mtp'] else '':>3} "
                f"{row['figure']:<14} {row['llama_mib']:>10.2f} {row['planner_mib']:>12.2f} {row['error_pct']:>8.2f}"
            )
            if row["counted"]:
                counted.append(row["error_pct"])
            elif row["figure"] == "compute_llama":
                compute_llama.append(row["error_pct"])
            elif row["figure"] == "compute":
                compute_estimate.append(row["error_pct"])
    print(f"\nloads={sum(len(cases) for _, cases in matrix().values())}")
    print(f"planner_max_error_pct={max(counted):.2f}")
    print(f"planner_compute_error_pct={max(compute_llama):.2f}")
    print(f"planner_compute_estimate_error_pct={max(compute_estimate):.2f}")


if __name__ == "__main__":
    main()

"""Planner error per figure against the buffer sizes the real llama-server prints.

Prints a table, then `planner_max_error_pct=` (target <= 3).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support import stack  # noqa: E402


def main() -> None:
    stack.configure_environment(stack.new_run_dir("qwenweb-bench-planner-"))
    from tests.support.planner_check import compare

    rows = compare(Path(os.environ["QWENWEB_MODELS_DIR"]) / "gemma-3-270m-q4_k_m.gguf")
    print(f"{'ctx':>6} {'slots':>5} {'cache':>5} {'figure':<13} {'llama MiB':>10} {'planner MiB':>12} {'error %':>8}")
    for row in rows:
        print(
            f"{row['ctx']:>6} {row['parallel']:>5} {row['cache']:>5} {row['figure']:<13} "
            f"{row['llama_mib']:>10.2f} {row['planner_mib']:>12.2f} {row['error_pct']:>8.2f}"
            + ("" if row["counted"] else "  (llama.cpp --fit projection, whole MiB; not in the target)")
        )
    print(f"planner_max_error_pct={max(row['error_pct'] for row in rows if row['counted']):.2f}")


if __name__ == "__main__":
    main()

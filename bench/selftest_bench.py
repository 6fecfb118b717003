"""The dashboard's self-test for the default profile beside llama.cpp's own llama-bench on the
same model and threads, alternating, medians.

The self-test measures through llama-server (HTTP, chat template, one slot), llama-bench the
bare model: the two should be of one order, the server somewhat slower.
Prints `selftest_pp_tps=`, `selftest_tg_tps=`, `selftest_ttft_ms=`, `llama_bench_pp_tps=`, `llama_bench_tg_tps=`.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cpu_bench import run_llama_bench  # noqa: E402

from tests.support import stack  # noqa: E402

ROUNDS = 3
THREADS = 2


def llama_bench(model: Path, prompt_tokens: int, generate_tokens: int) -> tuple[float, float]:
    binary = Path(os.environ["LLAMA_SERVER_BIN"]).parent / "llama-bench"
    argv = [
        str(binary), "-m", str(model), "-p", str(prompt_tokens), "-n", str(generate_tokens),
        "-t", str(THREADS), "-r", "1", "-o", "json",
    ]  # fmt: skip
    rows = json.loads(run_llama_bench(argv, timeout=600).stdout)
    pp = next(r["avg_ts"] for r in rows if r["n_prompt"] and not r["n_gen"])
    tg = next(r["avg_ts"] for r in rows if r["n_gen"] and not r["n_prompt"])
    return pp, tg


def main() -> None:
    run_dir = stack.django_run_dir("qwenweb-bench-", parallel=2)
    from django.conf import settings

    from monitor.models import Placement, ServerProfile

    # llama-server and llama-bench on the same threads.
    ServerProfile.objects.filter(is_default=True).update(threads=THREADS, revision_options=[])
    Placement.objects.filter(profile__is_default=True).update(live_revision=None, live_options=[])

    services = [stack.start_redis(run_dir), stack.start_llama(run_dir)]
    try:
        from monitor.telemetry.selftest import run_self_test

        model = settings.MODELS_DIR / settings.DEFAULT_MODEL_FILE
        ours: dict[str, list[float]] = {"pp": [], "tg": [], "ttft": []}
        reference: dict[str, list[float]] = {"pp": [], "tg": []}
        for round_ in range(ROUNDS):
            result = asyncio.run(run_self_test(None))
            if not result.ok:
                raise SystemExit(f"self-test failed: {result.error}")
            ours["pp"].append(result.prompt_tps)
            ours["tg"].append(result.generation_tps)
            ours["ttft"].append(result.ttft_ms)
            pp, tg = llama_bench(model, result.prompt_tokens, settings.MONITOR_SELFTEST_GENERATE_TOKENS)
            reference["pp"].append(pp)
            reference["tg"].append(tg)
            print(
                f"round {round_}: self-test pp {result.prompt_tps:.1f} tg {result.generation_tps:.1f} "
                f"ttft {result.ttft_ms:.0f} ms ({result.prompt_tokens} prompt tokens) | "
                f"llama-bench pp {pp:.1f} tg {tg:.1f}",
                flush=True,
            )
        print(f"threads={THREADS}")
        print(f"llama_bench_pp_tps={statistics.median(reference['pp']):.1f}")
        print(f"llama_bench_tg_tps={statistics.median(reference['tg']):.1f}")
        print(f"selftest_ttft_ms={statistics.median(ours['ttft']):.0f}")
        print(f"selftest_pp_tps={statistics.median(ours['pp']):.1f}")
        print(f"selftest_tg_tps={statistics.median(ours['tg']):.1f}")
    finally:
        for service in reversed(services):
            service.stop()


if __name__ == "__main__":
    main()

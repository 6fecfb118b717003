"""Load the default model in a real llama-server at several settings and compare its
buffer sizes with the planner's figures (shared by the test and the benchmark)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import httpx

from monitor.catalog.planner import MIB, PlanRequest, plan
from monitor.catalog.registry import read_model_info
from scripts.local_services import free_port
from tests.support.load_log import buffer_sizes, fit_host_breakdown

CASES = [
    (1024, 1, "f16"),
    (4096, 2, "f16"),
    (8192, 1, "f16"),
    (2048, 1, "q8_0"),
    (4096, 2, "q8_0"),
    (16384, 1, "q8_0"),
]


def load_log(model_path: Path, ctx: int, parallel: int, cache_type: str) -> str:
    port = free_port()
    argv = [
        os.environ["LLAMA_SERVER_BIN"], "--model", str(model_path), "--host", "127.0.0.1", "--port", str(port),
        "--ctx-size", str(ctx), "--parallel", str(parallel), "-ctk", cache_type, "-ctv", cache_type, "--no-webui",
        "--log-verbosity", "4",  # the buffer sizes are printed at info level
    ]  # fmt: skip
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        else:
            raise TimeoutError("llama-server did not load the model")
    finally:
        process.terminate()
        output, _ = process.communicate(timeout=30)
    return output


def compare(model_path: Path) -> list[dict]:
    """Rows of figures; those with ``counted`` False are shown beside the others but are
    not part of the accuracy target (llama.cpp's --fit rounds to whole MiB and its
    compute figure is one the planner only estimates)."""
    model = read_model_info(model_path)
    rows = []
    for ctx, parallel, cache_type in CASES:
        log_text = load_log(model_path, ctx, parallel, cache_type)
        actual = buffer_sizes(log_text)
        predicted = plan(
            model, PlanRequest(ctx_size=ctx, parallel=parallel, cache_type_k=cache_type, cache_type_v=cache_type)
        )
        for figure, measured, ours in (
            ("kv_cache", sum(actual["KV"].values()), predicted.kv_total / MIB),
            # Mapped weights; CPU_REPACK is a re-laid copy of some CPU tensors, not counted twice.
            (
                "model_buffer",
                actual["model"].get("CPU_Mapped", 0) + actual["model"].get("CPU", 0),
                predicted.weights_cpu / MIB,
            ),
        ):
            rows.append(
                {
                    "ctx": ctx, "parallel": parallel, "cache": cache_type, "figure": figure,
                    "llama_mib": measured, "planner_mib": ours, "error_pct": abs(ours - measured) / measured * 100,
                    "counted": True,
                }
            )  # fmt: skip
        fit = fit_host_breakdown(log_text)
        if fit:
            ours_total = (predicted.weights_cpu + predicted.kv_total + predicted.compute_cpu) / MIB
            for figure, measured, ours in (
                ("fit_context", fit["context"], predicted.kv_total / MIB),
                ("fit_total", fit["total"], ours_total),
            ):
                rows.append(
                    {
                        "ctx": ctx, "parallel": parallel, "cache": cache_type, "figure": figure,
                        "llama_mib": measured, "planner_mib": ours, "error_pct": abs(ours - measured) / measured * 100,
                        "counted": False,
                    }
                )  # fmt: skip
    return rows

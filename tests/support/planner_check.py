"""Load a model in a real llama-server at given settings and compare its buffer sizes
with the planner's figures (shared by the tests and the benchmark)."""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from monitor.catalog.planner import MIB, PlanRequest, plan, plan_flags
from monitor.catalog.projection import parse_projection
from monitor.catalog.registry import read_model_info
from scripts.local_services import free_port
from tests.support.load_log import buffer_sizes


@dataclass(frozen=True)
class Case:
    ctx: int
    parallel: int = 1
    cache: str = "f16"
    cpu_moe: int = 0
    mtp: bool = False
    gpu_layers: int = 0
    ubatch: int = 512

    def request(self) -> PlanRequest:
        return PlanRequest(
            ctx_size=self.ctx, parallel=self.parallel, cache_type_k=self.cache, cache_type_v=self.cache,
            cpu_moe_layers=self.cpu_moe, mtp=self.mtp, gpu_layers=self.gpu_layers, ubatch=self.ubatch,
        )  # fmt: skip

    def flags(self) -> list[str]:
        # A micro-batch larger than the batch is clamped by llama-server: keep the batch at least as large.
        batch = ["--batch-size", str(self.ubatch)] if self.ubatch > 2048 else []
        return plan_flags(self.request()) + batch


# The default model (Gemma 3: sliding-window layers), as the planner was first checked.
CASES = [
    Case(1024),
    Case(4096, 2),
    Case(8192),
    Case(2048, cache="q8_0"),
    Case(4096, 2, "q8_0"),
    Case(16384, cache="q8_0"),
]


RESERVED = "sched_reserve: reserve took"


def load_log(model_path: Path, case: Case, extra: tuple[str, ...] = (), *, buffers_only: bool = False) -> str:
    """llama-server's log of loading ``model_path`` at ``case``: until it answers /health, or with
    ``buffers_only`` until every context has reserved its compute buffer (the target's, and the MTP
    draft's twice), which skips the slow checks a loaded server then makes."""
    port = free_port()
    argv = [
        os.environ["LLAMA_SERVER_BIN"], "--model", str(model_path), "--host", "127.0.0.1", "--port", str(port),
        "--no-webui", "--log-verbosity", "4",  # the buffer sizes are printed at info level
        *case.flags(), *extra,
    ]  # fmt: skip
    reserves = 3 if case.mtp else 1
    with tempfile.NamedTemporaryFile("w+") as log:  # a file, not a pipe: a verbose server never blocks on it
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and process.poll() is None:
                if buffers_only:
                    if Path(log.name).read_text(errors="replace").count(RESERVED) >= reserves:
                        break
                    time.sleep(0.05)
                    continue
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.1)
            loaded = process.poll() is None and time.monotonic() < deadline
        finally:
            process.terminate()
            process.wait(timeout=30)
        log.seek(0)
        output = log.read()
    if not loaded:
        raise RuntimeError(f"llama-server did not load {model_path.name}: {output[-2000:]}")
    return output


def _row(case: Case, figure: str, measured: float, ours: float, counted: bool = True) -> dict:
    ours = round(ours, 2)  # llama-server prints buffer sizes to 0.01 MiB: compare like with like
    error = abs(ours - measured) / measured * 100 if measured else (0.0 if ours == 0 else 100.0)
    return {
        "ctx": case.ctx, "parallel": case.parallel, "cache": case.cache, "cpu_moe": case.cpu_moe, "mtp": case.mtp,
        "ubatch": case.ubatch, "figure": figure, "llama_mib": measured, "planner_mib": ours, "error_pct": error,
        "counted": counted,
    }  # fmt: skip


def compare(model_path: Path, cases: list[Case] = CASES) -> list[dict]:
    """Rows of figures: weights, KV, recurrent state and compute buffers (the planner's own, from
    llama.cpp's graphs) are ``counted``; llama.cpp's --fit projection (whole MiB) is shown beside them."""
    model = read_model_info(model_path)
    rows = []
    for case in cases:
        log_text = load_log(model_path, case, buffers_only=True)
        actual = buffer_sizes(log_text)
        predicted = plan(model, case.request())
        # Mapped weights; CPU_REPACK is a re-laid copy of some CPU tensors, not counted twice.
        weights = sum(mib for device, mib in actual["model"].items() if device != "CPU_REPACK")
        rows.append(_row(case, "weights", weights, (predicted.weights_cpu + predicted.weights_gpu) / MIB))
        rows.append(_row(case, "kv_cache", sum(actual.get("KV", {}).values()), predicted.kv_total / MIB))
        if model.recurrent_layers:
            rows.append(_row(case, "recurrent", sum(actual.get("RS", {}).values()), predicted.recurrent_total / MIB))
        compute = sum(actual.get("compute", {}).values())
        rows.append(_row(case, "compute", compute, (predicted.compute_cpu + predicted.compute_gpu) / MIB))
        projection = parse_projection(log_text)  # the fit step ran before the load: what the page shows on request
        if projection.devices:
            ours = (projection.compute_cpu + projection.compute_gpu) / MIB
            rows.append(_row(case, "compute_llama", compute, ours, False))
    return rows

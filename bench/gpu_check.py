"""On a machine with an NVIDIA GPU: NVML readings and the VRAM planner against a real load.

Run by hand where a GPU is lent (never by CI or `make bench`; it needs only the
`gguf` and `pynvml` packages, not Django):

    python bench/gpu_check.py --binary PATH/TO/llama-server [--layers 28 --embd 3072]

It writes a synthetic Llama-shaped GGUF (zero weights, F16, the tokenizer of one of
llama.cpp's vocabulary test files), loads it in llama-server at several context sizes
and cache types with every layer on the GPU, and prints the buffers llama-server
reports on the GPU beside the planner's figures and beside NVML's reading of the
process's memory. Generation on zero weights is meaningless text, but its speed is real.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from monitor.catalog.planner import MIB, PlanRequest, plan  # noqa: E402
from monitor.catalog.registry import read_model_info  # noqa: E402
from monitor.telemetry.gpu import detect_gpus  # noqa: E402
from scripts.local_services import free_port  # noqa: E402
from tests.support.load_log import buffer_sizes  # noqa: E402

CASES = [(4096, 1, "f16"), (32768, 2, "q8_0"), (131072, 1, "q8_0")]


def nvml_snapshot() -> list[dict]:
    """Everything the dashboard reads per GPU, straight from NVML."""
    import pynvml

    pynvml.nvmlInit()
    rows = []
    try:
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
            utilization = pynvml.nvmlDeviceGetUtilizationRates(handle)
            rows.append(
                {
                    "name": pynvml.nvmlDeviceGetName(handle),
                    "used_mib": memory.used / MIB,
                    "total_mib": memory.total / MIB,
                    "gpu_util_pct": utilization.gpu,
                    "temperature_c": pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU),
                    "power_w": pynvml.nvmlDeviceGetPowerUsage(handle) / 1000,
                    "sm_clock_mhz": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
                    "mem_clock_mhz": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM),
                    "throttle_reasons": pynvml.nvmlDeviceGetCurrentClocksEventReasons(handle),
                    "processes": [
                        {"pid": process.pid, "used_mib": (process.usedGpuMemory or 0) / MIB}
                        for process in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
                    ],
                }
            )
    finally:
        pynvml.nvmlShutdown()
    return rows


def write_model(path: Path, vocab_file: Path, *, layers: int, embd: int, heads: int, kv_heads: int, ff: int) -> None:
    import gguf

    reader = gguf.GGUFReader(vocab_file)
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_name("qwenweb synthetic llama")
    writer.add_context_length(131072)
    writer.add_embedding_length(embd)
    writer.add_block_count(layers)
    writer.add_feed_forward_length(ff)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_freq_base(500000.0)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    vocab = 0
    for field in reader.fields.values():
        if field.name.startswith("tokenizer."):
            value = field.contents()
            kind = field.types[0]
            sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
            writer.add_key_value(field.name, value, kind, sub_type=sub)
            if field.name == "tokenizer.ggml.tokens":
                vocab = len(value)
    head_dim = embd // heads

    def tensor(name: str, *shape: int, dtype=np.float16) -> None:
        writer.add_tensor(name, np.zeros(shape, dtype=dtype))

    tensor("token_embd.weight", vocab, embd)
    tensor("output_norm.weight", embd, dtype=np.float32)
    tensor("output.weight", vocab, embd)
    for il in range(layers):
        tensor(f"blk.{il}.attn_norm.weight", embd, dtype=np.float32)
        tensor(f"blk.{il}.attn_q.weight", heads * head_dim, embd)
        tensor(f"blk.{il}.attn_k.weight", kv_heads * head_dim, embd)
        tensor(f"blk.{il}.attn_v.weight", kv_heads * head_dim, embd)
        tensor(f"blk.{il}.attn_output.weight", embd, heads * head_dim)
        tensor(f"blk.{il}.ffn_norm.weight", embd, dtype=np.float32)
        tensor(f"blk.{il}.ffn_gate.weight", ff, embd)
        tensor(f"blk.{il}.ffn_up.weight", ff, embd)
        tensor(f"blk.{il}.ffn_down.weight", embd, ff)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def load_and_measure(binary: str, model: Path, ctx: int, parallel: int, cache: str, log_dir: Path) -> dict:
    port = free_port()
    argv = [
        binary, "--model", str(model), "--host", "127.0.0.1", "--port", str(port), "--ctx-size", str(ctx),
        "--parallel", str(parallel), "-ctk", cache, "-ctv", cache, "--n-gpu-layers", "all", "--flash-attn", "on",
        "--no-webui", "--log-verbosity", "4",
    ]  # fmt: skip
    log_path = log_dir / f"load-{ctx}-{parallel}-{cache}.log"
    started = time.monotonic()
    with log_path.open("w") as log:
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        result: dict = {"ctx": ctx, "parallel": parallel, "cache": cache}
        try:
            while time.monotonic() - started < 180:
                if process.poll() is not None:
                    raise RuntimeError(f"llama-server exited with {process.returncode}; see {log_path}")
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                time.sleep(0.2)
            result["load_s"] = time.monotonic() - started
            time.sleep(0.5)
            try:
                result["nvml"] = nvml_snapshot()
            except Exception as error:  # noqa: BLE001 - report, keep measuring
                result["nvml_error"] = repr(error)
            body = {"prompt": "hello " * 500, "n_predict": 128, "ignore_eos": True, "cache_prompt": False}
            timings = httpx.post(f"http://127.0.0.1:{port}/completion", json=body, timeout=120).json()["timings"]
            result["pp_tps"] = timings["prompt_per_second"]
            result["tg_tps"] = timings["predicted_per_second"]
        finally:
            process.terminate()
            process.wait(timeout=60)
    result["buffers"] = buffer_sizes(log_path.read_text(errors="replace"))
    return result


def sampler_check() -> None:
    """The dashboard's NVML sampler, idle and under load (a PyTorch matrix loop, where installed)."""
    import threading
    from dataclasses import asdict

    from monitor.telemetry.gpu import NvmlSampler

    sampler = NvmlSampler()
    stop = threading.Event()

    def load() -> None:
        import torch

        a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        while not stop.is_set():
            (a @ a).sum().item()

    for phase in ("idle", "busy"):
        if phase == "busy":
            threading.Thread(target=load, daemon=True).start()
            time.sleep(2)
        for _ in range(3):
            started = time.perf_counter()
            gpus, reason = sampler.sample(time.monotonic())
            cost_ms = (time.perf_counter() - started) * 1000
            print(f"sampler_{phase} cost_ms={cost_ms:.2f} reason={reason!r} " + json.dumps([asdict(g) for g in gpus]))
            time.sleep(1)
    stop.set()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sampler", action="store_true", help="only the dashboard's NVML sampler, idle and busy")
    parser.add_argument("--binary")
    parser.add_argument("--vocab", default=None, help="a ggml-vocab-*.gguf from llama.cpp's models/ folder")
    parser.add_argument("--layers", type=int, default=28)
    parser.add_argument("--embd", type=int, default=3072)
    parser.add_argument("--heads", type=int, default=24)
    parser.add_argument("--kv-heads", type=int, default=8)
    parser.add_argument("--ff", type=int, default=8192)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if args.sampler:
        sampler_check()
        return
    out = Path(args.out or tempfile.mkdtemp(prefix="qwenweb-gpu-"))
    gpus, reason = detect_gpus()
    print(f"detect_gpus={[(gpu.name, round(gpu.total_bytes / MIB)) for gpu in gpus]} reason={reason!r}")
    if gpus:
        print("nvml_idle=" + json.dumps(nvml_snapshot()))
    work = Path(tempfile.mkdtemp(prefix="qwenweb-gpu-model-"))
    model_path = work / "synthetic-llama-f16.gguf"
    started = time.monotonic()
    write_model(
        model_path,
        Path(args.vocab),
        layers=args.layers,
        embd=args.embd,
        heads=args.heads,
        kv_heads=args.kv_heads,
        ff=args.ff,
    )
    info = read_model_info(model_path)
    print(f"model_gib={model_path.stat().st_size / 1024**3:.2f} written_s={time.monotonic() - started:.1f}")
    print(f"{'ctx':>7} {'np':>3} {'cache':>5} {'figure':<8} {'llama MiB':>10} {'planner MiB':>12} {'error %':>8}")
    errors = []
    for ctx, parallel, cache in CASES:
        result = load_and_measure(args.binary, model_path, ctx, parallel, cache, out)
        predicted = plan(
            info, PlanRequest(ctx_size=ctx, parallel=parallel, cache_type_k=cache, cache_type_v=cache, gpu_layers=999)
        )
        device = next((name for name in result["buffers"].get("KV", {}) if name != "CPU"), "CPU")
        rows = [
            ("weights", result["buffers"].get("model", {}).get(device, 0), predicted.weights_gpu / MIB, True),
            ("kv", result["buffers"].get("KV", {}).get(device, 0), predicted.kv_gpu / MIB, True),
            ("compute", result["buffers"].get("compute", {}).get(device, 0), predicted.compute_gpu / MIB, False),
        ]
        for figure, measured, ours, counted in rows:
            error = abs(ours - measured) / measured * 100 if measured else float("nan")
            if counted:
                errors.append(error)
            print(f"{ctx:>7} {parallel:>3} {cache:>5} {figure:<8} {measured:>10.1f} {ours:>12.1f} {error:>8.2f}")
        process_mib = sum(p["used_mib"] for gpu in result.get("nvml", []) for p in gpu["processes"])
        print(
            f"  device={device} load_s={result['load_s']:.1f} pp_tps={result['pp_tps']:.0f} "
            f"tg_tps={result['tg_tps']:.1f} nvml_process_mib={process_mib:.0f} planner_vram_mib={predicted.vram / MIB:.0f}"
            + (f" nvml_error={result['nvml_error']}" if "nvml_error" in result else "")
        )
    counted = [error for error in errors if error == error]  # NaN: a figure llama-server did not print
    print(f"gpu_planner_max_error_pct={max(counted, default=float('nan')):.2f}")


if __name__ == "__main__":
    main()

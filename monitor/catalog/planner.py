"""VRAM planner: what a llama-server launch puts where, computed the way llama.cpp does.

Weights come from the real tensor sizes (per layer, input and output layers apart);
the KV cache from the cells llama.cpp allocates (full-attention layers hold the
whole context, sliding-window layers ``pad(n_swa + n_ubatch, 256)`` cells per
sequence, as in ``llama-kv-cache-iswa.cpp``) times the cache type's bytes per
element. Compute buffers are an estimate and shown as one.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from monitor.catalog.registry import ModelInfo

GIB = 1024**3
MIB = 1024**2
# Bytes per element of each KV cache type llama-server accepts (blocks of 32 values).
CACHE_TYPE_BYTES = {
    "f32": 4.0,
    "f16": 2.0,
    "bf16": 2.0,
    "q8_0": 34 / 32,
    "q4_0": 18 / 32,
    "q4_1": 20 / 32,
    "iq4_nl": 18 / 32,
    "q5_0": 22 / 32,
    "q5_1": 24 / 32,
}
SWA_PAD = 256
# What the CUDA runtime itself holds per llama-server process (context, cuBLAS workspace):
# NVML's per-process figure minus llama.cpp's buffers was 590 MiB at three context sizes
# on an H200 (driver 580, CUDA 13; bench/gpu_check.py). Smaller cards hold somewhat less.
GPU_RUNTIME_BYTES = 590 * 1024**2


def _pad(value: int, multiple: int) -> int:
    return (value + multiple - 1) // multiple * multiple


@dataclass(frozen=True)
class PlanRequest:
    ctx_size: int
    parallel: int = 1
    cache_type_k: str = "f16"
    cache_type_v: str = "f16"
    gpu_layers: int = 0  # repeating layers offloaded; n_layer + 1 offloads the output layer too
    cpu_moe_layers: int = 0  # --n-cpu-moe: expert weights of the first N layers stay in RAM
    ubatch: int = 512
    kv_unified: bool = False
    swa_full: bool = False

    def __post_init__(self):
        for name in (self.cache_type_k, self.cache_type_v):
            if name not in CACHE_TYPE_BYTES:
                raise ValueError(f"unknown cache type {name!r}; llama-server accepts {', '.join(CACHE_TYPE_BYTES)}")
        if self.ctx_size < 1 or self.parallel < 1 or self.gpu_layers < 0 or self.cpu_moe_layers < 0:
            raise ValueError("context, slots and layer counts must be positive")


@dataclass
class LayerRow:
    name: str
    device: str  # "GPU" or "CPU"
    weights_gpu: int
    weights_cpu: int
    kv: int
    sliding: bool = False


@dataclass
class Plan:
    request: PlanRequest
    rows: list[LayerRow] = field(default_factory=list)
    kv_cells_full: int = 0
    kv_cells_swa: int = 0
    compute_gpu: int = 0
    compute_cpu: int = 0
    runtime_gpu: int = 0

    @property
    def weights_gpu(self) -> int:
        return sum(row.weights_gpu for row in self.rows)

    @property
    def weights_cpu(self) -> int:
        return sum(row.weights_cpu for row in self.rows)

    @property
    def kv_gpu(self) -> int:
        return sum(row.kv for row in self.rows if row.device == "GPU")

    @property
    def kv_cpu(self) -> int:
        return sum(row.kv for row in self.rows if row.device == "CPU")

    @property
    def kv_total(self) -> int:
        return self.kv_gpu + self.kv_cpu

    @property
    def vram(self) -> int:
        return self.weights_gpu + self.kv_gpu + self.compute_gpu + self.runtime_gpu

    @property
    def ram(self) -> int:
        return self.weights_cpu + self.kv_cpu + self.compute_cpu


def kv_cells(model: ModelInfo, request: PlanRequest) -> tuple[int, int]:
    """(cells of a full-attention layer, cells of a sliding-window layer), all sequences together."""
    streams = 1 if request.kv_unified else request.parallel
    per_stream = _pad(max(request.ctx_size // streams, 1), SWA_PAD)
    if request.kv_unified:
        swa = _pad(min(per_stream, model.sliding_window * request.parallel + request.ubatch), SWA_PAD)
    else:
        swa = _pad(min(per_stream, model.sliding_window + request.ubatch), SWA_PAD)
    if request.swa_full or not model.sliding_window:
        swa = per_stream
    return per_stream * streams, swa * streams


def plan(model: ModelInfo, request: PlanRequest) -> Plan:
    full_cells, swa_cells = kv_cells(model, request)
    per_cell = model.n_head_kv * (
        model.head_dim_k * CACHE_TYPE_BYTES[request.cache_type_k]
        + model.head_dim_v * CACHE_TYPE_BYTES[request.cache_type_v]
    )
    first_gpu_layer = model.n_layer - min(request.gpu_layers, model.n_layer)
    result = Plan(request=request, kv_cells_full=full_cells, kv_cells_swa=swa_cells)
    result.rows.append(LayerRow("input (token embeddings)", "CPU", 0, model.input_bytes, 0))
    for il in range(model.n_layer):
        on_gpu = il >= first_gpu_layer
        sliding = bool(model.swa_layers[il]) if model.swa_layers else False
        kv = int((swa_cells if sliding else full_cells) * per_cell)
        experts_on_cpu = model.layer_expert_bytes[il] if (on_gpu and il < request.cpu_moe_layers) else 0
        gpu = model.layer_bytes[il] - experts_on_cpu if on_gpu else 0
        cpu = experts_on_cpu if on_gpu else model.layer_bytes[il]
        result.rows.append(LayerRow(f"layer {il}", "GPU" if on_gpu else "CPU", gpu, cpu, kv, sliding))
    output_on_gpu = request.gpu_layers > model.n_layer
    output = model.output_bytes + (model.input_bytes if model.tied_output and output_on_gpu else 0)
    result.rows.append(
        LayerRow(
            "output",
            "GPU" if output_on_gpu else "CPU",
            output if output_on_gpu else 0,
            0 if output_on_gpu else model.output_bytes,
            0,
        )
    )
    compute = estimate_compute(model, request, full_cells, swa_cells)
    if request.gpu_layers > 0:
        result.compute_gpu = compute
        result.runtime_gpu = GPU_RUNTIME_BYTES
        result.compute_cpu = request.ubatch * model.n_embd * 4 * 2  # host-side staging
    else:
        result.compute_cpu = compute
    return result


def estimate_compute(model: ModelInfo, request: PlanRequest, full_cells: int, swa_cells: int) -> int:
    """An estimate of the compute buffer: activations of one micro-batch plus the logits."""
    ubatch = request.ubatch
    activations = ubatch * model.n_embd * 4 * 8
    attention = ubatch * max(full_cells // max(request.parallel, 1), 1) * max(model.n_head, 1) * 4 // 4
    logits = model.vocab_size * 4 * request.parallel
    return activations + attention + logits


@dataclass
class Recommendation:
    gpu_layers: int
    ctx_size: int
    cpu_moe_layers: int
    plan: Plan
    fits: bool


def recommend(model: ModelInfo, request: PlanRequest, free_vram: int, margin: int = GIB) -> Recommendation:
    """The most GPU layers, then the largest context, that fit in ``free_vram - margin``."""
    budget = free_vram - margin

    def fits(candidate: PlanRequest) -> bool:
        return plan(model, candidate).vram <= budget

    all_layers = model.n_layer + 1
    best = None
    for layers in range(all_layers, -1, -1):
        candidate = replace(request, gpu_layers=layers, cpu_moe_layers=0)
        if fits(candidate):
            best = candidate
            break
        # A MoE model may fit whole when the experts of some layers stay in RAM.
        if model.is_moe and layers == all_layers:
            for cpu_moe in range(1, model.n_layer + 1):
                moe_candidate = replace(candidate, cpu_moe_layers=cpu_moe)
                if fits(moe_candidate):
                    best = moe_candidate
                    break
            if best:
                break
    if best is None:
        best = replace(request, gpu_layers=0, cpu_moe_layers=0)
    if best.gpu_layers == all_layers:
        limit = max(model.context_length, best.ctx_size)
        step = 1024 * best.parallel
        ctx = best.ctx_size
        while ctx + step <= limit and fits(replace(best, ctx_size=ctx + step)):
            ctx += step
        best = replace(best, ctx_size=ctx)
    final = plan(model, best)
    return Recommendation(best.gpu_layers, best.ctx_size, best.cpu_moe_layers, final, final.vram <= budget)

"""VRAM planner: what a llama-server launch puts where, computed the way llama.cpp does.

Weights come from the real tensor sizes (per layer, input and output layers apart);
the KV cache from the cells llama.cpp allocates (full-attention layers hold the
whole context, sliding-window layers ``pad(n_swa + n_ubatch, 256)`` cells per
sequence, as in ``llama-kv-cache-iswa.cpp``) times the cache type's bytes per
element, on attention layers only: recurrent (DeltaNet) layers hold a per-slot F32
state instead (``llama-memory-recurrent.cpp``), and MTP blocks are loaded, with a
draft cache, only when MTP is on. Compute buffers are a calibrated estimate unless
llama.cpp's own projection replaces them (``projection.py``); the plan says which.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from monitor.catalog.layers import ATTENTION, MTP, RECURRENT, RS_ROLLBACK, SLIDING
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
    gpu_layers: int = 0  # blocks offloaded (MTP blocks count); all blocks + 1 offloads the output layer too
    cpu_moe_layers: int = 0  # --n-cpu-moe: expert weights of the first N blocks stay in RAM
    ubatch: int = 512
    kv_unified: bool = False
    swa_full: bool = False
    mtp: bool = False  # --spec-type draft-mtp: loads the MTP blocks and gives them a draft context
    draft_max: int = 3  # --spec-draft-n-max: recurrent state snapshots kept per sequence with MTP

    def __post_init__(self):
        for name in (self.cache_type_k, self.cache_type_v):
            if name not in CACHE_TYPE_BYTES:
                raise ValueError(f"unknown cache type {name!r}; llama-server accepts {', '.join(CACHE_TYPE_BYTES)}")
        if self.ctx_size < 1 or self.parallel < 1 or self.gpu_layers < 0 or self.cpu_moe_layers < 0:
            raise ValueError("context, slots and layer counts must be positive")

    @property
    def rs_snapshots(self) -> int:
        """``n_rs_seq``: llama.cpp keeps this many extra recurrent states per sequence for MTP rollback."""
        return self.draft_max if self.mtp else 0


@dataclass
class LayerRow:
    name: str
    device: str  # "GPU" or "CPU"
    weights_gpu: int
    weights_cpu: int
    kv: int
    sliding: bool = False
    kind: str = ATTENTION
    recurrent: int = 0  # recurrent state (conv + DeltaNet), F32, all slots
    loaded: bool = True  # False for MTP blocks when MTP is off: llama.cpp skips their tensors


@dataclass
class Plan:
    request: PlanRequest
    rows: list[LayerRow] = field(default_factory=list)
    kv_cells_full: int = 0
    kv_cells_swa: int = 0
    compute_gpu: int = 0
    compute_cpu: int = 0
    runtime_gpu: int = 0
    covered: bool = True  # False: the architecture's cache rules are unknown, only weights are exact
    compute_source: str = "estimate"  # or "llama.cpp": its fit step's projection (whole MiB)

    def _sum(self, attribute: str, device: str | None = None) -> int:
        return sum(getattr(row, attribute) for row in self.rows if device is None or row.device == device)

    @property
    def weights_gpu(self) -> int:
        return self._sum("weights_gpu")

    @property
    def weights_cpu(self) -> int:
        return self._sum("weights_cpu")

    @property
    def kv_gpu(self) -> int:
        return self._sum("kv", "GPU")

    @property
    def kv_cpu(self) -> int:
        return self._sum("kv", "CPU")

    @property
    def kv_total(self) -> int:
        return self.kv_gpu + self.kv_cpu

    @property
    def recurrent_gpu(self) -> int:
        return self._sum("recurrent", "GPU")

    @property
    def recurrent_cpu(self) -> int:
        return self._sum("recurrent", "CPU")

    @property
    def recurrent_total(self) -> int:
        return self.recurrent_gpu + self.recurrent_cpu

    @property
    def vram(self) -> int:
        return self.weights_gpu + self.kv_gpu + self.recurrent_gpu + self.compute_gpu + self.runtime_gpu

    @property
    def ram(self) -> int:
        return self.weights_cpu + self.kv_cpu + self.recurrent_cpu + self.compute_cpu


def context_cells(request: PlanRequest) -> tuple[int, int]:
    """(cells per stream, streams): llama_context pads n_ctx, then each sequence's share, to 256."""
    n_ctx = _pad(request.ctx_size, SWA_PAD)
    if request.kv_unified:
        return n_ctx, 1
    return _pad(n_ctx // request.parallel, SWA_PAD), request.parallel


def kv_cells(model: ModelInfo, request: PlanRequest) -> tuple[int, int]:
    """(cells of a full-attention layer, cells of a sliding-window layer), all sequences together."""
    per_stream, streams = context_cells(request)
    window = model.sliding_window * (request.parallel if request.kv_unified else 1)
    swa = _pad(min(per_stream, window + request.ubatch), SWA_PAD)
    if request.swa_full or not model.sliding_window:
        swa = per_stream
    return per_stream * streams, swa * streams


def _kv_per_cell(model: ModelInfo, il: int, type_k: str, type_v: str) -> float:
    heads = model.kv_heads(il)
    return heads * (model.head_dim_k * CACHE_TYPE_BYTES[type_k] + model.head_dim_v * CACHE_TYPE_BYTES[type_v])


def recurrent_bytes_per_layer(model: ModelInfo, request: PlanRequest) -> int:
    """One recurrent layer's r and s buffers: F32, one row per slot and per MTP snapshot."""
    snapshots = request.rs_snapshots if model.architecture in RS_ROLLBACK else 0
    rows = max(1, request.parallel) * (1 + snapshots)
    return (model.facts.ssm.conv_values + model.facts.ssm.state_values) * 4 * rows


def _layer_row(model: ModelInfo, request: PlanRequest, il: int, on_gpu: bool, cells: tuple[int, int]) -> LayerRow:
    kind = model.layer_kinds[il] if il < len(model.layer_kinds) else ATTENTION
    loaded = kind != MTP or request.mtp
    weights = model.layer_bytes[il] if loaded else 0
    experts_on_cpu = model.layer_expert_bytes[il] if (on_gpu and loaded and il < request.cpu_moe_layers) else 0
    if kind in (ATTENTION, SLIDING):
        kv = int(
            (cells[1] if kind == SLIDING else cells[0])
            * _kv_per_cell(model, il, request.cache_type_k, request.cache_type_v)
        )
    elif kind == MTP and request.mtp:  # the draft context: same cells, llama-server's default f16 draft cache
        kv = int(cells[0] * _kv_per_cell(model, il, "f16", "f16"))
    else:
        kv = 0
    recurrent = recurrent_bytes_per_layer(model, request) if kind == RECURRENT else 0
    return LayerRow(
        f"layer {il}", "GPU" if on_gpu else "CPU",
        weights - experts_on_cpu if on_gpu else 0, experts_on_cpu if on_gpu else weights,
        kv, kind == SLIDING, kind, recurrent, loaded,
    )  # fmt: skip


def plan(model: ModelInfo, request: PlanRequest) -> Plan:
    cells = kv_cells(model, request)
    first_gpu_layer = model.n_layer - min(request.gpu_layers, model.n_layer)
    result = Plan(request=request, kv_cells_full=cells[0], kv_cells_swa=cells[1], covered=model.covered)
    result.rows.append(LayerRow("input (token embeddings)", "CPU", 0, model.input_bytes, 0, kind="input"))
    for il in range(model.n_layer):
        result.rows.append(_layer_row(model, request, il, il >= first_gpu_layer, cells))
    output_on_gpu = request.gpu_layers > model.n_layer
    output = model.output_bytes + (model.input_bytes if model.tied_output and output_on_gpu else 0)
    result.rows.append(
        LayerRow(
            "output", "GPU" if output_on_gpu else "CPU",
            output if output_on_gpu else 0, 0 if output_on_gpu else model.output_bytes, 0, kind="output",
        )
    )  # fmt: skip
    compute = estimate_compute(model, request, *cells)
    if request.gpu_layers > 0:
        result.compute_gpu = compute
        result.runtime_gpu = GPU_RUNTIME_BYTES
        result.compute_cpu = request.ubatch * model.n_embd * 4 * 2  # host-side staging
    else:
        result.compute_cpu = compute
    return result


def estimate_compute(model: ModelInfo, request: PlanRequest, full_cells: int, swa_cells: int) -> int:
    """Calibrated estimate of the compute buffers (flash attention, as llama.cpp picks on CPU and CUDA).

    Fitted to llama-server's CPU buffers over the bench's architectures: the feed-forward
    and embedding activations of one micro-batch, plus one f16 attention mask per kind of
    attention layer (each slot's cells x micro-batch), plus the MTP draft context's share.
    llama.cpp's own projection replaces this when the page asks for it."""
    ubatch = request.ubatch
    kinds = set(model.layer_kinds[: model.trunk_layers])
    if model.is_moe:
        ff = model.expert_ff * model.expert_used_count + model.shared_expert_ff
        per_token = 4 * ff + 3 * model.n_embd
    else:
        ff = max(model.facts.feed_forward or [0])
        per_token = 4 * ff + 2 * model.n_embd
    streams = 1 if request.kv_unified else request.parallel
    mask = 0
    if ATTENTION in kinds:
        mask += full_cells // streams * ubatch * 2
    if SLIDING in kinds:
        mask += swa_cells // streams * ubatch * 2
    # The MTP draft context: its feed-forward and its own mask over the same cells.
    draft = ubatch * 4 * 4 * ff + full_cells // streams * ubatch * 2 if request.mtp and model.nextn_layers else 0
    return ubatch * 4 * per_token + mask + draft


def plan_flags(request: PlanRequest) -> list[str]:
    """The llama-server options that reproduce ``request`` (argv items, in the order llama-server documents)."""
    flags = ["--n-gpu-layers", str(request.gpu_layers), "--ctx-size", str(request.ctx_size)]
    flags += ["--parallel", str(request.parallel), "--cache-type-k", request.cache_type_k]
    flags += ["--cache-type-v", request.cache_type_v]
    if request.cpu_moe_layers:
        flags += ["--n-cpu-moe", str(request.cpu_moe_layers)]
    if request.ubatch != PlanRequest.ubatch:
        flags += ["--ubatch-size", str(request.ubatch)]
    if request.kv_unified:
        flags.append("--kv-unified")
    if request.swa_full:
        flags.append("--swa-full")
    if request.mtp:
        flags += ["--spec-type", "draft-mtp", "--spec-draft-n-max", str(request.draft_max)]
    return flags

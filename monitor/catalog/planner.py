"""VRAM and RAM planner: what a llama-server launch puts where, computed the way llama.cpp does.

Weights come from the real tensor sizes (per layer, input and output layers apart);
the KV cache from the cells llama.cpp allocates (full-attention layers hold the
whole context, sliding-window layers ``pad(n_swa + n_ubatch, 256)`` cells per
sequence, as in ``llama-kv-cache-iswa.cpp``) times the cache type's bytes per
element, on attention layers only: recurrent (DeltaNet) layers hold a per-slot F32
state instead (``llama-memory-recurrent.cpp``), and MTP blocks are loaded, with a
draft context of their own, only when MTP is on. Compute buffers are llama.cpp's own
graphs replayed through ggml's allocator (``compute.py``) for the architectures it
builds, a rough estimate otherwise, or llama.cpp's projection when asked
(``projection.py``); the plan says which.

System RAM is planned whole (``ram_items``): weights and caches left on the CPU, the
compute and output buffers, a vision projector, llama-server's prompt cache up to its
``--cache-ram`` cap, the context checkpoints each slot keeps (``--ctx-checkpoints``, each
the part of a sequence's memory that cannot be rolled back: the recurrent state, or the
sliding-window cells) and the process itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from monitor.catalog import compute
from monitor.catalog.ggml_graph import TYPE_SIZES
from monitor.catalog.layers import ATTENTION, MTP, RECURRENT, RS_ROLLBACK, SLIDING
from monitor.catalog.registry import ModelInfo, projector_bytes

GIB = 1024**3
MIB = 1024**2
# Bytes per element of each KV cache type llama-server accepts (ggml's block sizes).
CACHE_TYPE_BYTES = {
    name: TYPE_SIZES[name][0] / TYPE_SIZES[name][1]
    for name in ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")
}
SWA_PAD = 256
# What the CUDA runtime itself holds per llama-server process (context, cuBLAS workspace), as measured on an
# H200 (docs/performance.md, monitor/catalog/planner.py); smaller cards hold somewhat less.
GPU_RUNTIME_BYTES = 590 * 1024**2
# llama-server's defaults for what it keeps in RAM besides the model (common/common.h).
DEFAULT_CACHE_RAM_MIB = 8192
DEFAULT_CTX_CHECKPOINTS = 32
# The process itself: the binary's pages, its threads and heap, and the vocabulary's tables, fitted to an
# idle llama-server's resident memory less its buffers (docs/performance.md, monitor/catalog/planner.py).
PROCESS_BASE_BYTES = 24 * MIB
VOCAB_BYTES_PER_TOKEN = 260
# The host-side staging of a GPU context (the input embeddings and the logits), per token of a micro-batch.
HOST_STAGING_PER_TOKEN = 8  # x n_embd


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
    cache_ram_mib: int = DEFAULT_CACHE_RAM_MIB  # --cache-ram: the prompt cache's cap (-1: none, 0: off)
    ctx_checkpoints: int = DEFAULT_CTX_CHECKPOINTS  # --ctx-checkpoints, per slot
    vision: bool = False  # --mmproj: the model's vision projector is loaded too
    # --embeddings / --reranking: every token of a micro-batch is an output (pooled into one vector a text),
    # no logits, and no prompt cache (each request is answered on its own).
    embeddings: bool = False

    def __post_init__(self):
        for name in (self.cache_type_k, self.cache_type_v):
            if name not in CACHE_TYPE_BYTES:
                raise ValueError(f"unknown cache type {name!r}; llama-server accepts {', '.join(CACHE_TYPE_BYTES)}")
        if self.ctx_size < 1 or self.parallel < 1 or self.gpu_layers < 0 or self.cpu_moe_layers < 0:
            raise ValueError("context, slots and layer counts must be positive")
        if self.cache_ram_mib < -1 or self.ctx_checkpoints < 0 or self.ubatch < 1 or self.draft_max < 0:
            raise ValueError("cache size, checkpoints, micro-batch and draft length must be positive")

    @property
    def rs_snapshots(self) -> int:
        """``n_rs_seq``: llama.cpp keeps this many extra recurrent states per sequence for MTP rollback."""
        return self.draft_max if self.mtp else 0

    @property
    def outputs(self) -> int:
        """Rows of logits per micro-batch: llama-server asks one per slot, plus each drafted token with MTP."""
        return self.parallel * (1 + (self.draft_max if self.mtp else 0))


@dataclass
class LayerRow:
    name: str
    device: str  # "GPU" or "CPU"
    weights_gpu: int
    weights_cpu: int
    kv: int
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
    compute_source: str = "graph"  # "graph": llama.cpp's graph replayed; "estimate"; "llama.cpp": its projection
    output_cpu: int = 0  # logits (and MTP hidden state) output buffers, host memory
    projector_gpu: int = 0  # vision projector weights and compute buffer
    projector_cpu: int = 0
    prompt_cache: int = 0  # llama-server's prompt cache, at its cap
    checkpoint_bytes: int = 0  # one context checkpoint of one slot
    process_cpu: int = 0  # the process itself

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
        return (
            self.weights_gpu + self.kv_gpu + self.recurrent_gpu + self.compute_gpu + self.runtime_gpu
            + self.projector_gpu
        )  # fmt: skip

    @property
    def checkpoints(self) -> int:
        """Every slot's context checkpoints, all kept."""
        return self.checkpoint_bytes * self.request.ctx_checkpoints * self.request.parallel

    @property
    def ram_items(self) -> dict[str, int]:
        """System RAM by what holds it (bytes)."""
        return {
            "weights": self.weights_cpu,
            "cache": self.kv_cpu + self.recurrent_cpu,
            "compute": self.compute_cpu + self.output_cpu,
            "projector": self.projector_cpu,
            "prompt_cache": self.prompt_cache,
            "checkpoints": self.checkpoints,
            "process": self.process_cpu,
        }

    @property
    def ram(self) -> int:
        return sum(self.ram_items.values())


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
        kv, kind, recurrent, loaded,
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
    _plan_compute(model, request, cells, result)
    _plan_ram(model, request, cells, result)
    return result


def compute_context(model: ModelInfo, request: PlanRequest, cells: tuple[int, int], draft: bool = False):
    """The settings llama.cpp reserves a context's graphs with (``draft``: the MTP draft context)."""
    per_stream, streams = context_cells(request)
    snapshots = request.rs_snapshots if model.architecture in RS_ROLLBACK and not draft else 0
    return compute.Context(
        n_ctx=_pad(request.ctx_size, SWA_PAD), n_ctx_seq=per_stream, n_seq=request.parallel,
        n_ubatch=request.ubatch, n_outputs=request.parallel if draft else request.outputs,
        kv_unified=request.kv_unified, swa_cells=cells[1] // streams,
        type_k="f16" if draft else request.cache_type_k, type_v="f16" if draft else request.cache_type_v,
        rs_snapshots=snapshots,
    )  # fmt: skip


def _plan_compute(model: ModelInfo, request: PlanRequest, cells: tuple[int, int], result: Plan) -> None:
    on_gpu = request.gpu_layers > 0
    alignment = compute.CUDA_ALIGNMENT if on_gpu else compute.CPU_ALIGNMENT
    draft = 0
    if model.architecture in compute.GRAPHS:
        shape = compute.shape_from_model(model)
        main = compute.compute_buffer(shape, compute_context(model, request, cells), alignment=alignment)
        if request.mtp and model.nextn_layers and model.architecture in RS_ROLLBACK:
            draft = compute.compute_buffer(
                shape, compute_context(model, request, cells, draft=True), mtp=True, alignment=alignment
            )
    else:
        main = estimate_compute(model, request, *cells)
        result.compute_source = "estimate"
    if on_gpu:
        result.compute_gpu = main + draft
        result.runtime_gpu = GPU_RUNTIME_BYTES
        result.compute_cpu = request.ubatch * model.n_embd * HOST_STAGING_PER_TOKEN  # host-side staging
        if request.gpu_layers < model.n_layer:  # layers left on the CPU run there: a CPU graph as well
            result.compute_cpu += main
    else:
        result.compute_cpu = main + draft


def checkpoint_bytes(model: ModelInfo, request: PlanRequest, cells: tuple[int, int]) -> int:
    """One context checkpoint of one slot: what llama_state_seq_get_size_ext(PARTIAL_ONLY) copies.

    Hybrid models keep each recurrent layer's state of the sequence; sliding-window models its
    window's cells; models whose memory rolls back at any position (plain attention) keep none."""
    if model.recurrent_layers:
        return (model.facts.ssm.conv_values + model.facts.ssm.state_values) * 4 * model.recurrent_layers
    if SLIDING in model.layer_kinds[: model.trunk_layers] and not request.swa_full:
        per_stream = cells[1] // (1 if request.kv_unified else request.parallel)
        return sum(
            int(per_stream * _kv_per_cell(model, il, request.cache_type_k, request.cache_type_v))
            for il, kind in enumerate(model.layer_kinds)
            if kind == SLIDING
        )
    return 0


def _plan_ram(model: ModelInfo, request: PlanRequest, cells: tuple[int, int], result: Plan) -> None:
    vocab = model.vocab_size
    outputs = request.outputs
    result.output_cpu = vocab * 4 * outputs + (model.n_embd * 4 * outputs if request.mtp else 0)
    if request.embeddings:
        result.output_cpu = model.n_embd * 4 * request.ubatch
    if request.mtp and model.nextn_layers:
        result.output_cpu += vocab * 4 * request.parallel  # the draft context's own logits
    result.process_cpu = PROCESS_BASE_BYTES + VOCAB_BYTES_PER_TOKEN * vocab
    result.checkpoint_bytes = checkpoint_bytes(model, request, cells)
    if request.embeddings:
        result.prompt_cache = 0
    elif request.cache_ram_mib > 0:
        result.prompt_cache = request.cache_ram_mib * MIB
    elif request.cache_ram_mib < 0:  # no byte cap: llama-server keeps up to n_ctx tokens of states
        result.prompt_cache = result.kv_total + result.recurrent_total
    if request.vision and model.mmproj is not None:
        weights, work = projector_bytes(model.mmproj)
        if request.gpu_layers > 0:  # --mmproj-offload is on by default: the projector goes where the model goes
            result.projector_gpu = weights + work
        else:
            result.projector_cpu = weights + work


def estimate_compute(model: ModelInfo, request: PlanRequest, full_cells: int, swa_cells: int) -> int:
    """A rough estimate of the compute buffers for an architecture ``compute.py`` has no graph of.

    The feed-forward and embedding activations of one micro-batch, plus one f16 attention
    mask per kind of attention layer (each slot's cells x micro-batch). llama.cpp's own
    projection replaces this when the page asks for it."""
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
    return ubatch * 4 * per_token + mask


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
    if request.embeddings:
        flags.append("--embeddings")
    if request.cache_ram_mib != DEFAULT_CACHE_RAM_MIB:
        flags += ["--cache-ram", str(request.cache_ram_mib)]
    if request.ctx_checkpoints != DEFAULT_CTX_CHECKPOINTS:
        flags += ["--ctx-checkpoints", str(request.ctx_checkpoints)]
    return flags

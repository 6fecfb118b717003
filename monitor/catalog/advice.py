"""What to run on a given card: the recommendation and the speed to expect.

For a MoE model, "every layer on the GPU, the experts of the first N layers in
RAM" (``--n-cpu-moe N``) is tried before any layer leaves the GPU: the experts
are most of the bytes but a token reads only ``expert_used / expert_count`` of
them, which is how these models reach usable speed on an 8 GB card.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from monitor.catalog.planner import GIB, MIB, Plan, PlanRequest, plan
from monitor.catalog.registry import ModelInfo

CONTEXT_STEP = 1024


@dataclass
class Recommendation:
    gpu_layers: int
    ctx_size: int
    cpu_moe_layers: int
    plan: Plan
    fits: bool
    max_context: int = 0  # the longest context with every layer on the GPU (MoE: every expert in RAM); 0: none


def _largest_context(model: ModelInfo, request: PlanRequest, budget: int) -> int:
    if plan(model, request).vram > budget:
        return 0
    limit = max(model.context_length, request.ctx_size)
    step = CONTEXT_STEP * request.parallel
    low, high = request.ctx_size, limit  # binary search over whole steps: the plan grows with the context
    if plan(model, replace(request, ctx_size=high)).vram <= budget:
        return high
    while high - low > step:
        middle = low + (high - low) // 2 // step * step or low + step
        if plan(model, replace(request, ctx_size=middle)).vram <= budget:
            low = middle
        else:
            high = middle
    return low


def _first_fit(model: ModelInfo, request: PlanRequest, budget: int) -> PlanRequest | None:
    all_layers = model.n_layer + 1
    whole = replace(request, gpu_layers=all_layers, cpu_moe_layers=0)
    if plan(model, whole).vram <= budget:
        return whole
    if model.is_moe:
        for cpu_moe in range(1, model.n_layer + 1):
            candidate = replace(whole, cpu_moe_layers=cpu_moe)
            if plan(model, candidate).vram <= budget:
                return candidate
    # Then layers leave the GPU from the first one, with every expert already in RAM for a MoE model.
    cpu_moe = model.n_layer if model.is_moe else 0
    for layers in range(all_layers - 1, 0, -1):
        candidate = replace(request, gpu_layers=layers, cpu_moe_layers=cpu_moe)
        if plan(model, candidate).vram <= budget:
            return candidate
    return None


def recommend(model: ModelInfo, request: PlanRequest, free_vram: int, margin: int = GIB) -> Recommendation:
    """The most GPU layers (MoE: fewest experts in RAM first), then the largest context, within ``free_vram - margin``."""
    budget = free_vram - margin
    all_layers = model.n_layer + 1
    best = _first_fit(model, request, budget) or replace(request, gpu_layers=0, cpu_moe_layers=0)
    if best.gpu_layers == all_layers:
        best = replace(best, ctx_size=max(best.ctx_size, _largest_context(model, best, budget)))
    smallest = replace(
        request, gpu_layers=all_layers, cpu_moe_layers=model.n_layer if model.is_moe else 0, ctx_size=256
    )
    final = plan(model, best)
    return Recommendation(
        best.gpu_layers, best.ctx_size, best.cpu_moe_layers, final, final.vram <= budget,
        _largest_context(model, smallest, budget),
    )  # fmt: skip


@dataclass
class Speed:
    tokens_per_second: float
    gpu_bytes: int  # weight bytes one token reads from VRAM
    cpu_bytes: int  # and from RAM


def decode_speed(model: ModelInfo, request: PlanRequest, gpu_gbs: float | None, ram_gbs: float | None) -> Speed | None:
    """Order of magnitude of decode speed: memory-bound, so active weight bytes over bandwidth.

    None when a bandwidth the plan needs is unknown: the planner says it cannot tell."""
    share = model.expert_used_count / model.expert_count if model.expert_count else 1.0
    first_gpu_layer = model.n_layer - min(request.gpu_layers, model.n_layer)
    gpu = cpu = 0
    for il in range(model.trunk_layers):  # MTP blocks do not run in the main pass
        experts = int(model.layer_expert_bytes[il] * share)
        rest = model.layer_bytes[il] - model.layer_expert_bytes[il]
        if il < first_gpu_layer:
            cpu += rest + experts
        elif il < request.cpu_moe_layers:
            gpu, cpu = gpu + rest, cpu + experts
        else:
            gpu += rest + experts
    if request.gpu_layers > model.n_layer:
        gpu += model.output_bytes + (model.input_bytes if model.tied_output else 0)
    else:
        cpu += model.output_bytes + (model.input_bytes if model.tied_output else 0)
    if (gpu and not gpu_gbs) or (cpu and not ram_gbs):
        return None
    seconds = (gpu / (gpu_gbs * 1e9) if gpu else 0.0) + (cpu / (ram_gbs * 1e9) if cpu else 0.0)
    return Speed(1 / seconds if seconds else 0.0, gpu, cpu)


@dataclass
class RamChange:
    option: str  # the llama-server option to lower
    current: int
    suggested: int
    saves: int  # bytes


@dataclass
class RamAdvice:
    fits: bool
    budget: int  # available RAM less the margin
    short: int  # bytes over the budget (0 when it fits)
    changes: list[RamChange]  # what to lower, in order; ``short`` stays above 0 when even all of it is not enough


def ram_advice(model: ModelInfo, request: PlanRequest, available: int, margin: int = 2 * GIB) -> RamAdvice:
    """Whether the plan's RAM fits ``available - margin``, and if not which of --cache-ram,
    --ctx-checkpoints and --parallel to lower, and to what: the prompt cache first (it only saves
    re-reading prompts), then checkpoints (they make follow-ups fast on hybrid and sliding-window
    models), then slots (each one holds its share of state and checkpoints)."""
    current = plan(model, request)
    budget = available - margin
    short = current.ram - budget
    if short <= 0:
        return RamAdvice(True, budget, 0, [])
    changes: list[RamChange] = []
    if current.prompt_cache and request.cache_ram_mib != 0:
        cut = min(current.prompt_cache, -(-short // MIB) * MIB)
        mib = max(current.prompt_cache - cut, 0) // MIB
        changes.append(RamChange("--cache-ram", request.cache_ram_mib, mib, current.prompt_cache - mib * MIB))
        short -= current.prompt_cache - mib * MIB
    per_checkpoint = current.checkpoint_bytes * request.parallel
    if short > 0 and per_checkpoint and request.ctx_checkpoints:
        fewer = min(request.ctx_checkpoints, -(-short // per_checkpoint))
        changes.append(RamChange("--ctx-checkpoints", request.ctx_checkpoints, request.ctx_checkpoints - fewer,
                                 fewer * per_checkpoint))  # fmt: skip
        short -= fewer * per_checkpoint
        request = replace(request, ctx_checkpoints=request.ctx_checkpoints - fewer)
    if short > 0 and request.parallel > 1:
        for slots in range(request.parallel - 1, 0, -1):
            saved = plan(model, request).ram - plan(model, replace(request, parallel=slots)).ram
            if saved >= short or slots == 1:
                changes.append(RamChange("--parallel", request.parallel, slots, saved))
                short -= saved
                break
    return RamAdvice(False, budget, max(short, 0), changes)


@dataclass
class BoxFit:
    """One box's verdict for a plan: the plan as asked, and what to run there."""

    has_gpu: bool
    vram_fits: bool  # the plan as asked, in the box's free VRAM less the margin (no GPU: nothing needs any)
    ram: RamAdvice  # the plan as asked, in its available RAM
    advice: Recommendation  # what to run there (no GPU: every layer on the CPU)
    advice_ram: RamAdvice  # the recommendation in its available RAM

    @property
    def fits(self) -> bool:
        return self.vram_fits and self.ram.fits

    @property
    def advice_fits(self) -> bool:
        return self.advice.fits and self.advice_ram.fits


def fit_on_box(
    model: ModelInfo, request: PlanRequest, free_vram: int | None, ram_available: int, margin: int, ram_margin: int
) -> BoxFit:
    """``request`` on a box with ``free_vram`` (None: no GPU) and ``ram_available``, and the recommendation
    there. A box without a GPU runs every layer on the CPU whatever ``--n-gpu-layers`` says."""
    if free_vram is None:
        cpu = replace(request, gpu_layers=0, cpu_moe_layers=0)
        ram = ram_advice(model, cpu, ram_available, ram_margin)
        return BoxFit(False, True, ram, Recommendation(0, cpu.ctx_size, 0, plan(model, cpu), ram.fits), ram)
    advice = recommend(model, request, free_vram, margin)
    return BoxFit(
        True,
        plan(model, request).vram <= free_vram - margin,
        ram_advice(model, request, ram_available, ram_margin),
        advice,
        ram_advice(model, advice.plan.request, ram_available, ram_margin),
    )

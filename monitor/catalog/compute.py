"""Compute buffers, sized the way llama.cpp sizes them: its graphs, replayed through ggml's allocator.

At start-up llama.cpp reserves (``llama_context::sched_reserve``) the graph of the largest
micro-batch (``min(n_ctx, n_ubatch)`` tokens over ``n_seq_max`` sequences, ``n_outputs``
rows of logits), the graph of one token per sequence, and the largest again; the compute
buffer is the biggest of these. Here each architecture's graph is rebuilt tensor by tensor
from the pinned tree (``src/models/<arch>.cpp``, ``src/llama-graph.cpp``,
``src/models/delta-net-base.cpp``), in the order ``ggml_build_forward_expand`` visits it,
and ``ggml_alloc.reserve`` replays the allocator over it (``llama_graphs.py`` builds them). Flash attention is assumed on, as
llama.cpp picks it on CPU and CUDA (``-fa auto``).

Graphs built: Gated DeltaNet hybrids (``qwen35moe``, ``qwen35``, ``qwen3next``, fused
DeltaNet kernel), attention models with dense or routed-expert feed-forward (``qwen3moe``,
``qwen3``, ``llama``), sliding-window ``gemma3``, and the MTP draft head of ``qwen35moe``
/ ``qwen35``. Weights never enter the compute buffer; only their shapes are used.
"""

from __future__ import annotations

import functools

from monitor.catalog.ggml_alloc import reserve
from monitor.catalog.graph_shape import Context, Shape
from monitor.catalog.llama_graphs import GraphBuilder

# Architectures whose graph this module builds (others keep the planner's older estimate).
GRAPHS = ("qwen35moe", "qwen35", "qwen3next", "qwen3moe", "qwen3", "llama", "gemma3")
CPU_ALIGNMENT = 32  # TENSOR_ALIGNMENT, ggml-cpu's buffer type
CUDA_ALIGNMENT = 128


def shape_from_model(model) -> Shape:
    """The graph-relevant facts of a ``registry.ModelInfo``."""
    kinds = tuple(model.layer_kinds[: model.trunk_layers])
    heads = tuple(model.facts.head_count) or (model.n_head,) * model.n_layer
    kv_heads = tuple(model.kv_heads(il) for il in range(model.n_layer))
    ff = tuple(model.facts.feed_forward) or (0,) * model.n_layer
    return Shape(
        arch=model.architecture, kinds=kinds, n_embd=model.n_embd, n_head=heads, n_head_kv=kv_heads,
        head_k=model.head_dim_k, head_v=model.head_dim_v, n_ff=ff, n_vocab=model.vocab_size,
        n_expert=model.expert_count, n_expert_used=model.expert_used_count, n_ff_exp=model.expert_ff,
        n_ff_shexp=model.shared_expert_ff, ssm=model.facts.ssm, nextn=model.nextn_layers,
    )  # fmt: skip


def _graph_size(shape: Shape, ctx: Context, n_tokens: int, n_seqs: int, n_outputs: int, mtp: bool, alignment: int):
    n_tokens = -(-n_tokens // n_seqs) * n_seqs  # an equal share of tokens per sequence
    builder = GraphBuilder(shape, ctx, n_tokens, n_seqs, n_outputs)
    if mtp:
        builder.mtp()
    elif shape.arch in ("qwen35moe", "qwen35", "qwen3next"):
        builder.qwen35()
    else:
        builder.transformer()
    for tensor in builder.outputs:
        tensor.is_output = True
    return reserve(builder.gf, alignment)


@functools.lru_cache(maxsize=256)
def compute_buffer(shape: Shape, ctx: Context, mtp: bool = False, alignment: int = CPU_ALIGNMENT) -> int:
    """Bytes of the compute buffer llama.cpp reserves for a context (``mtp``: the MTP draft context's)."""
    n_tokens = min(ctx.n_ctx, ctx.n_ubatch)
    n_outputs = min(n_tokens, ctx.n_outputs)
    prompt = _graph_size(shape, ctx, n_tokens, ctx.n_seq, n_outputs, mtp, alignment)
    token = _graph_size(shape, ctx, ctx.n_seq, ctx.n_seq, ctx.n_seq, mtp, alignment)
    return max(prompt, token)

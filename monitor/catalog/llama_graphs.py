"""llama.cpp's graphs, rebuilt tensor by tensor for the compute buffer (``compute.py`` sizes them).

Each architecture's graph as the pinned tree builds it (``src/models/<arch>.cpp``,
``src/llama-graph.cpp``, ``src/models/delta-net-base.cpp``), with its expand calls in the same
order, so the nodes come in the order ``ggml_build_forward_expand`` gives them: the inputs
(``build_inp_embd``'s three branches, the attention mask over each stream's cells, Hadamard
rotations of quantized caches), the Gated DeltaNet layer with the fused kernel, gated
attention, dense and routed-expert feed-forward, and qwen35moe's MTP draft head. Flash
attention is assumed on, as llama.cpp picks it on CPU and CUDA (``-fa auto``). Weights are
there for their shapes only.
"""

from __future__ import annotations

from monitor.catalog import ggml_graph as g
from monitor.catalog.graph_shape import Context, Shape
from monitor.catalog.layers import ATTENTION, RECURRENT, SLIDING

# Positions per token: the multi-axis (M-)RoPE of the Qwen3.5 family carries 4.
POSITIONS_PER_TOKEN = {"qwen35moe": 4, "qwen35": 4}


class GraphBuilder:
    """One graph of one micro-batch: ``n_tokens`` tokens over ``n_seqs`` sequences."""

    def __init__(self, shape: Shape, ctx: Context, n_tokens: int, n_seqs: int, n_outputs: int):
        self.s, self.c = shape, ctx
        self.n_tokens, self.n_seqs, self.n_outputs = n_tokens, n_seqs, n_outputs
        self.n_seq_tokens = n_tokens // n_seqs
        self.gf = g.Graph()
        self.outputs: list[g.Tensor] = []

    # --- inputs ---------------------------------------------------------------------------

    def inp_embd(self) -> g.Tensor:
        """build_inp_embd: token rows, embedding rows and the mixed path, all in the graph (a select)."""
        s, t = self.s, self.n_tokens
        tok_embd = g.weight("f16", s.n_embd, s.n_vocab)
        tokens = g.input_tensor("i32", t, name="inp_tokens")
        branches = [g.get_rows(tok_embd, tokens), g.input_tensor("f32", s.n_embd, t, name="inp_embd")]
        mixed_tokens = g.input_tensor("i32", t)
        mixed_slots = g.input_tensor("i64", t)
        mixed_embd = g.input_tensor("f32", s.n_embd, t)
        branches.append(g.set_rows(g.dup(mixed_embd), g.get_rows(tok_embd, mixed_tokens), mixed_slots))
        for branch in branches:
            self.gf.expand(branch)
        self.gf.expand(branches[0])
        return branches[0]

    def inp_attn(self, cells: int) -> dict:
        """The KV cache's inputs: row indices, the f16 mask over each stream's cells, Hadamard rotations."""
        c, t = self.c, self.n_tokens
        streams = 1 if c.kv_unified else self.n_seqs
        return {
            "k_idxs": g.input_tensor("i64", t),
            "v_idxs": g.input_tensor("i64", t),
            "mask": g.input_tensor("f16", cells, t // streams, 1, streams, name="kq_mask"),
            "cells": cells,
            "streams": streams,
            "k_rot": self._rotation(c.type_k, self.s.head_k, bool_k=True),
            "v_rot": self._rotation(c.type_v, self.s.head_v, bool_k=False),
        }

    @staticmethod
    def _rotation(type_name: str, head: int, bool_k: bool) -> g.Tensor | None:
        """llama_kv_cache: a quantized cache rotates heads by a Hadamard matrix (64, or larger for K)."""
        if not g.is_quantized(type_name) or head % 64:
            return None
        n = 64
        while bool_k and head % (2 * n) == 0:
            n *= 2
        return g.input_tensor("f32", n, n)

    def inp_rs(self) -> g.Tensor:
        return g.input_tensor("i32", self.c.n_seq, name="rs_s_copy")

    def norm(self, x: g.Tensor, weighted: bool = True) -> g.Tensor:
        out = g.rms_norm(x)
        return g.binary(out, g.weight("f32", x.ne[0]), "MUL") if weighted else out

    # --- attention ------------------------------------------------------------------------

    def hadamard(self, cur: g.Tensor, rot: g.Tensor) -> g.Tensor:
        n = rot.ne[0]
        count = cur.ne[0] * cur.ne[1] * cur.ne[2] * cur.ne[3]
        flat = g.reshape(cur, n, count // n) if cur.contiguous else g.cont(cur, n, count // n)
        return g.reshape(g.mul_mat(rot, flat), *cur.ne)

    def attention(self, inp: dict, q: g.Tensor, k: g.Tensor, v: g.Tensor, n_head_kv: int) -> g.Tensor:
        """build_attn (KV cache) + build_attn_mha with flash attention."""
        s, c, gf = self.s, self.c, self.gf
        if inp["k_rot"] is not None:
            q, k = self.hadamard(q, inp["k_rot"]), self.hadamard(k, inp["k_rot"])
        if inp["v_rot"] is not None:
            v = self.hadamard(v, inp["v_rot"])
        gf.expand(q)
        gf.expand(v)
        gf.expand(k)
        cells, streams = inp["cells"], inp["streams"]
        cache_k = g.weight(c.type_k, s.head_k * n_head_kv, cells, streams)
        cache_v = g.weight(c.type_v, s.head_v * n_head_kv, cells, streams)
        for cache, cur, idxs in ((cache_k, k, inp["k_idxs"]), (cache_v, v, inp["v_idxs"])):
            rows = g.view(cur, (cur.ne[0] * cur.ne[1], cur.ne[2]), (cur.nb[2],))
            target = g.reshape(cache, cache.ne[0], cells * streams) if streams > 1 else cache
            gf.expand(g.set_rows(target, rows, idxs))
        k_view = g.view(cache_k, (s.head_k, n_head_kv, cells, streams))
        v_view = g.view(cache_v, (s.head_v, n_head_kv, cells, streams))
        q = g.view(q, (q.ne[0], q.ne[1], q.ne[2] // streams, streams), (q.nb[1], q.nb[2]))
        q, k_view, v_view = (g.permute(x, 0, 2, 1, 3) for x in (q, k_view, v_view))
        cur = g.flash_attn_ext(q, k_view, v_view, inp["mask"])
        cur = g.reshape(cur, cur.ne[0] * cur.ne[1], cur.ne[2] * cur.ne[3])
        gf.expand(cur)
        if inp["v_rot"] is not None:
            cur = self.hadamard(cur, inp["v_rot"])
        return cur

    # --- feed-forward ---------------------------------------------------------------------

    def ffn(self, cur: g.Tensor, n_ff: int) -> g.Tensor:
        """build_ffn, SiLU with a parallel gate: up, gate, swiglu, down."""
        up = g.mul_mat(g.weight("f16", cur.ne[0], n_ff), cur)
        gate = g.mul_mat(g.weight("f16", cur.ne[0], n_ff), cur)
        return g.mul_mat(g.weight("f16", n_ff, cur.ne[0]), g.glu(gate, up))

    def moe(self, cur: g.Tensor) -> g.Tensor:
        """build_moe_ffn: softmax router, top-k, normalised weights, experts, weighted sum by views and adds."""
        s, gf, t = self.s, self.gf, cur.ne[1]
        logits = g.mul_mat(g.weight("f32", s.n_embd, s.n_expert), cur)
        probs = g.unary(logits, "SOFT_MAX")
        selected = g.argsort_top_k(probs, s.n_expert_used)
        weights = g.get_rows(g.reshape(probs, 1, s.n_expert, t), selected)
        weights = g.reshape(weights, s.n_expert_used, t)
        total = g.unary(g.sum_rows(weights), "CLAMP")
        weights = g.reshape(g.binary(weights, total, "DIV"), 1, s.n_expert_used, t)
        gf.expand(weights)
        cur = g.reshape(cur, s.n_embd, 1, t)
        up = g.mul_mat_id(g.weight("f16", s.n_embd, s.n_ff_exp, s.n_expert), cur, selected)
        gate = g.mul_mat_id(g.weight("f16", s.n_embd, s.n_ff_exp, s.n_expert), cur, selected)
        act = g.glu(gate, up)
        experts = g.mul_mat_id(g.weight("f16", s.n_ff_exp, s.n_embd, s.n_expert), act, selected)
        experts = g.binary(experts, weights, "MUL")
        gf.expand(experts)
        views = [g.view(experts, (s.n_embd, t), (experts.nb[2],)) for _ in range(s.n_expert_used)]
        for item in views:
            gf.expand(item)
        out = views[0]
        for item in views[1:]:
            out = g.binary(out, item, "ADD")
            gf.expand(out)
        return g.cont(out) if s.n_expert_used == 1 else out

    def qwen_ffn(self, post: g.Tensor, il: int) -> g.Tensor:
        """The Qwen3.5 family's feed-forward: routed experts and the gated shared one, or a dense one."""
        s = self.s
        if s.n_expert:
            return self.shared_expert(post, self.moe(post)) if s.n_ff_shexp else self.moe(post)
        return self.ffn(post, s.n_ff[il])

    def shared_expert(self, cur: g.Tensor, moe_out: g.Tensor) -> g.Tensor:
        shared = self.ffn(cur, self.s.n_ff_shexp)
        gate = g.unary(g.mul_mat(g.weight("f32", self.s.n_embd), cur), "UNARY")
        return g.binary(moe_out, g.binary(shared, gate, "MUL"), "ADD")

    # --- Gated DeltaNet (qwen35moe, qwen35, qwen3next) -------------------------------------

    def rs(self, states: g.Tensor, size: int, s_copy: g.Tensor) -> g.Tensor:
        """build_rs: gather every sequence's state (the reserve's cache is full: n_rs = n_seq_max)."""
        gf, n_rs = self.gf, self.c.n_seq
        flat = g.reshape(states, size, states.ne[1])
        gf.expand(g.inplace(g.view(flat, (size,)), "SCALE"))
        gathered = g.get_rows(flat, s_copy)
        out = g.view(gathered, (size, self.n_seqs), (gathered.nb[1],))
        gf.expand(out)
        extra = g.view(gathered, (size, n_rs - self.n_seqs), (gathered.nb[1],))
        gf.expand(g.cpy(extra, g.view(states, (size, n_rs - self.n_seqs), (states.nb[1],))))
        return out

    def delta_net(self, cur: g.Tensor, s_copy: g.Tensor) -> g.Tensor:
        """qwen35moe's build_layer_attn_linear with the fused Gated DeltaNet kernel."""
        s, c, gf = self.s, self.c, self.gf
        seqs, seq_tokens = self.n_seqs, self.n_seq_tokens
        head_k, k_heads, v_heads = s.ssm.state_size, s.ssm.group_count, s.ssm.time_step_rank
        head_v = s.ssm.inner_size // v_heads
        key_dim, value_dim = head_k * k_heads, head_v * v_heads
        conv_dim = 2 * key_dim + value_dim
        rows = c.n_seq * (1 + c.rs_snapshots)
        qkv = g.mul_mat(g.weight("f16", s.n_embd, conv_dim), cur)
        qkv = g.reshape(qkv, qkv.ne[0], seq_tokens, seqs)
        z = g.mul_mat(g.weight("f16", s.n_embd, value_dim), cur)
        if s.arch == "qwen3next":  # one projection for beta and alpha, split by views
            per_head = v_heads // k_heads
            mixed = g.reshape(
                g.mul_mat(g.weight("f16", s.n_embd, 2 * v_heads), cur), 2 * per_head, k_heads, seq_tokens, seqs
            )
            b = g.view(mixed, (per_head, k_heads, seq_tokens, seqs), mixed.nb[1:])
            a = g.view(mixed, (per_head, k_heads, seq_tokens, seqs), mixed.nb[1:])
            beta = g.reshape(g.unary(g.cont(b)), 1, v_heads, seq_tokens, seqs)
            alpha = g.cont(a, v_heads, seq_tokens, seqs)
        else:
            beta = g.reshape(g.mul_mat(g.weight("f16", s.n_embd, v_heads), cur), 1, v_heads, seq_tokens, seqs)
            beta = g.unary(beta)
            alpha = g.reshape(g.mul_mat(g.weight("f16", s.n_embd, v_heads), cur), v_heads, seq_tokens, seqs)
        alpha = g.unary(g.binary(alpha, g.weight("f32", v_heads), "ADD"))
        gate = g.reshape(g.binary(alpha, g.weight("f32", v_heads), "MUL"), 1, v_heads, seq_tokens, seqs)
        conv_states_all = g.weight("f32", s.n_embd_r, rows)
        ssm_states_all = g.weight("f32", s.n_embd_s, rows)
        # build_conv_state
        conv_states = g.reshape(self.rs(conv_states_all, s.n_embd_r, s_copy), s.ssm.conv_kernel - 1, conv_dim, seqs)
        conv_input = g.concat(conv_states, g.transpose(qkv), 0)
        for _ in range(c.rs_snapshots + 1):
            last = g.view(conv_input, (s.ssm.conv_kernel - 1, conv_dim, seqs), conv_input.nb[1:3])
            gf.expand(g.cpy(last, g.view(conv_states_all, (s.n_embd_r, seqs), (conv_states_all.nb[1],))))
        state = g.reshape(self.rs(ssm_states_all, s.n_embd_s, s_copy), head_v, head_v, v_heads, seqs)
        conv = g.unary(g.ssm_conv(conv_input, g.weight("f32", s.ssm.conv_kernel, conv_dim)))
        q = g.view(conv, (head_k, k_heads, seq_tokens, seqs), (head_k * 4, conv.nb[1], conv.nb[1] * seq_tokens))
        k = g.view(conv, (head_k, k_heads, seq_tokens, seqs), (head_k * 4, conv.nb[1], conv.nb[1] * seq_tokens))
        v = g.view(conv, (head_v, v_heads, seq_tokens, seqs), (head_v * 4, conv.nb[1], conv.nb[1] * seq_tokens))
        q = g.unary(g.rms_norm(q), "SCALE")
        k = g.unary(g.rms_norm(k), "SCALE")
        if s.arch == "qwen3next" and k_heads != v_heads:  # no broadcast in its fused kernel yet: repeat
            q, k = (self.repeat_heads(x, v_heads // k_heads) for x in (q, k))
        out = g.gated_delta_net(q, k, v, gate, beta, state, c.rs_snapshots + 1)
        output = g.view(out, (head_v, v_heads, seq_tokens, seqs), (head_v * 4, head_v * v_heads * 4))
        snapshots = min(seq_tokens, c.rs_snapshots + 1)
        written = g.view(out, (head_v * head_v * v_heads, seqs, snapshots), (out.nb[1],))
        gf.expand(g.cpy(written, g.view(ssm_states_all, (s.n_embd_s, seqs, snapshots), (ssm_states_all.nb[1],))))
        z = g.reshape(z, head_v, v_heads, seq_tokens, seqs)
        normed = g.binary(self.norm(output, weighted=False), g.weight("f32", head_v), "MUL")
        gated = g.binary(normed, g.unary(z), "MUL")
        final = g.reshape(gated, value_dim, seq_tokens, seqs)
        cur = g.mul_mat(g.weight("f16", value_dim, s.n_embd), final)
        return g.reshape(cur, s.n_embd, seq_tokens * seqs)

    def repeat_heads(self, x: g.Tensor, factor: int) -> g.Tensor:
        head, heads = x.ne[0], x.ne[1]
        flat = g.reshape(x, head, 1, heads, self.n_tokens)
        repeated = g.Tensor(x.type, (head, factor, heads, self.n_tokens), "REPEAT", (flat,))
        return g.reshape(repeated, head, heads * factor, self.n_seq_tokens, self.n_seqs)

    def gated_attention(self, cur: g.Tensor, inp: dict, positions: g.Tensor, il: int) -> g.Tensor:
        """qwen35moe's build_layer_attn: joint Q + gate projection, Q/K norms, rope, attention, sigmoid gate."""
        s, t = self.s, self.n_tokens
        n_head, n_head_kv, hd = s.n_head[il], s.n_head_kv[il], s.head_k
        q_full = g.mul_mat(g.weight("f16", s.n_embd, hd * 2 * n_head), cur)
        k = g.mul_mat(g.weight("f16", s.n_embd, hd * n_head_kv), cur)
        v = g.mul_mat(g.weight("f16", s.n_embd, hd * n_head_kv), cur)
        if s.arch == "qwen3next":
            q_full = g.reshape(q_full, hd * 2, n_head, t, 1)
        row = q_full.nb[0] * hd * 2
        q = g.view(q_full, (hd, n_head, t), (row, row * n_head))
        q = self.norm(q)
        k = self.norm(g.reshape(k, hd, n_head_kv, t))
        gate = g.cont(g.view(q_full, (hd, n_head, t), (row, row * n_head)), hd * n_head, t)
        v = g.reshape(v, hd, n_head_kv, t)
        q, k = g.rope(q, positions), g.rope(k, positions)
        cur = self.attention(inp, q, k, v, n_head_kv)
        cur = g.binary(cur, g.unary(gate), "MUL")
        return g.mul_mat(g.weight("f16", hd * n_head, s.n_embd), cur)

    # --- whole graphs ---------------------------------------------------------------------

    def finish(self, cur: g.Tensor, out_ids: g.Tensor, h_nextn: bool) -> None:
        s, gf = self.s, self.gf
        cur = self.norm(cur)
        if h_nextn:
            self.outputs.append(cur)
        cur = g.get_rows(cur, out_ids)
        self.outputs.append(cur)
        logits = g.mul_mat(g.weight("f16", s.n_embd, s.n_vocab), cur)
        self.outputs.append(logits)
        gf.expand(logits)

    def qwen35(self) -> None:
        """llama_model_qwen35moe::graph (and qwen35's, with a dense feed-forward)."""
        s, gf = self.s, self.gf
        inp_l = self.inp_embd()
        s_copy = self.inp_rs()
        attn = self.inp_attn(self.c.n_ctx_seq)
        positions = g.input_tensor("i32", self.n_tokens * POSITIONS_PER_TOKEN.get(s.arch, 1), name="inp_pos")
        out_ids = g.input_tensor("i32", self.n_outputs, name="out_ids")
        for il, kind in enumerate(s.kinds):
            cur = self.norm(inp_l)
            gf.expand(cur)
            cur = self.delta_net(cur, s_copy) if kind == RECURRENT else self.gated_attention(cur, attn, positions, il)
            cur = g.binary(cur, inp_l, "ADD")
            residual = cur
            cur = self.qwen_ffn(self.norm(cur), il)
            inp_l = g.binary(cur, residual, "ADD")
        self.finish(inp_l, out_ids, h_nextn=True)

    def transformer(self) -> None:
        """llama / qwen3 / qwen3moe / gemma3: attention (Q/K norms where the model has them), dense or MoE."""
        s, t = self.s, self.n_tokens
        inp_l = self.inp_embd()
        if s.arch == "gemma3":
            inp_l = g.unary(inp_l, "SCALE")
        positions = g.input_tensor("i32", t, name="inp_pos")
        full = self.inp_attn(self.c.n_ctx_seq) if ATTENTION in s.kinds else None
        sliding = self.inp_attn(self.c.swa_cells) if SLIDING in s.kinds else None
        out_ids = g.input_tensor("i32", self.n_outputs, name="out_ids")
        for il, kind in enumerate(s.kinds):
            n_head, n_head_kv = s.n_head[il], s.n_head_kv[il]
            cur = self.norm(inp_l)
            q = g.mul_mat(g.weight("f16", s.n_embd, s.head_k * n_head), cur)
            k = g.mul_mat(g.weight("f16", s.n_embd, s.head_k * n_head_kv), cur)
            v = g.mul_mat(g.weight("f16", s.n_embd, s.head_v * n_head_kv), cur)
            q, k = g.reshape(q, s.head_k, n_head, t), g.reshape(k, s.head_k, n_head_kv, t)
            v = g.reshape(v, s.head_v, n_head_kv, t)
            if s.arch != "llama":
                q, k = self.norm(q), self.norm(k)
            q, k = g.rope(q, positions), g.rope(k, positions)
            if s.arch == "gemma3":
                q = g.unary(q, "SCALE")
            cur = self.attention(sliding if kind == SLIDING else full, q, k, v, n_head_kv)
            cur = g.mul_mat(g.weight("f16", s.head_v * n_head, s.n_embd), cur)
            if s.arch == "gemma3":
                cur = self.norm(cur)
            cur = g.binary(cur, inp_l, "ADD")
            residual = cur
            cur = self.norm(cur)
            cur = self.moe(cur) if s.n_expert else self.ffn(cur, s.n_ff[il])
            if s.arch == "gemma3":
                cur = self.norm(cur)
            inp_l = g.binary(cur, residual, "ADD")
        self.finish(inp_l, out_ids, h_nextn=False)

    def mtp(self) -> None:
        """llama_model_qwen35moe::graph_mtp: the draft head over the target's hidden state."""
        s, t, gf = self.s, self.n_tokens, self.gf
        il = len(s.kinds)
        tokens = g.input_tensor("i32", t)
        # build_inp_embd's embeddings input is made too, but only the token path is reserved.
        tok = g.get_rows(g.weight("f16", s.n_embd, s.n_vocab), tokens)
        h = g.input_tensor("f32", s.n_embd, t)
        positions = g.input_tensor("i32", t * POSITIONS_PER_TOKEN.get(s.arch, 1), name="inp_pos")
        out_ids = g.input_tensor("i32", self.n_outputs, name="out_ids")
        attn = self.inp_attn(self.c.n_ctx_seq)
        joined = g.concat(self.norm(tok), self.norm(h), 0)
        cur = g.mul_mat(g.weight("f16", 2 * s.n_embd, s.n_embd), joined)
        residual = cur
        cur = self.gated_attention(self.norm(cur), attn, positions, il)
        cur = g.binary(cur, residual, "ADD")
        residual = cur
        cur = self.qwen_ffn(self.norm(cur), il)
        cur = g.binary(cur, residual, "ADD")
        cur = self.norm(cur)
        self.outputs.append(cur)
        cur = g.get_rows(cur, out_ids)
        logits = g.mul_mat(g.weight("f16", s.n_embd, s.n_vocab), cur)
        self.outputs.append(logits)
        gf.expand(logits)

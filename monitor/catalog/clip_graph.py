"""A vision projector's compute buffer: the warm-up graph ``mtmd`` reserves when llama-server loads it.

``tools/mtmd/clip.cpp`` builds the encoder's graph for a square warm-up image (for the
Qwen-VL family the side that yields the most image tokens it allows,
``set_limit_image_tokens``) and reserves it through ggml's allocator; the graph of
``PROJECTOR_TYPE_QWEN3VL`` (Qwen3-VL and Qwen3.5's projector, ``models/qwen3vl.cpp``)
is rebuilt here with ``ggml_graph`` and replayed the same way. Other projector types
are not claimed: their compute buffer is reported as unknown (0).
"""

from __future__ import annotations

from monitor.catalog import ggml_graph as g
from monitor.catalog.ggml_alloc import reserve
from monitor.catalog.gguf_header import Header

# clip.cpp's hparams for the Qwen-VL family: the warm-up image is 46 x 46 merged patches (set_warmup_n_tokens).
WARMUP_TOKENS_PER_SIDE = 46
BUILT = ("qwen3vl_merger",)


def _number(meta: dict, key: str, default: int = 0) -> int:
    value = meta.get(key, default)
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def warmup_bytes(header: Header, alignment: int = 32) -> int:
    """Bytes of the compute buffer the projector's warm-up reserves (0 when its graph is not built here)."""
    meta = header.metadata
    if meta.get("clip.projector_type") not in BUILT:
        return 0
    patch = _number(meta, "clip.vision.patch_size", 16)
    merge = _number(meta, "clip.vision.spatial_merge_size", 2)
    side = WARMUP_TOKENS_PER_SIDE * patch * merge
    weights = {tensor.name: tensor for tensor in header.tensors}
    return reserve(_qwen3vl(meta, weights, side), alignment)


def _conv2d(kernel: g.Tensor, image: g.Tensor, stride: int) -> g.Tensor:
    """ggml_conv_2d: im2col (f16), a matrix product, back to [OW, OH, OC, N]."""
    out_w, out_h = image.ne[0] // stride, image.ne[1] // stride
    columns = g.Tensor("f16", (kernel.ne[0] * kernel.ne[1] * kernel.ne[2], out_w, out_h, image.ne[3]), "IM2COL")
    columns.src = (kernel, image)
    flat = g.reshape(columns, columns.ne[0], columns.ne[1] * columns.ne[2] * columns.ne[3])
    result = g.mul_mat(flat, g.reshape(kernel, kernel.ne[0] * kernel.ne[1] * kernel.ne[2], kernel.ne[3]))
    result = g.reshape(result, out_w, out_h, image.ne[3], kernel.ne[3])
    return g.cont(g.permute(result, 0, 1, 3, 2))


def _layer_norm(x: g.Tensor, width: int) -> g.Tensor:
    out = g.unary(x, "NORM")
    out = g.binary(out, g.weight("f32", width), "MUL")
    return g.binary(out, g.weight("f32", width), "ADD")


def _linear(x: g.Tensor, n_in: int, n_out: int) -> g.Tensor:
    return g.binary(g.mul_mat(g.weight("f16", n_in, n_out), x), g.weight("f32", n_out), "ADD")


def _merge_2x2(x: g.Tensor, n_embd: int, side: int) -> g.Tensor:
    """The spatial merge of clip_graph_qwen3vl::build: neighbouring patches side by side."""
    x = g.cont(x, n_embd * 2, side // 2, side, 1)
    x = g.permute(g.reshape(x, n_embd * 2, side // 2, 2, side // 2), 0, 2, 1, 3)
    return g.cont(x, n_embd, side * side, 1)


def _qwen3vl(meta: dict, weights: dict, size: int) -> g.Graph:
    n_embd = _number(meta, "clip.vision.embedding_length")
    n_ff = _number(meta, "clip.vision.feed_forward_length")
    n_head = _number(meta, "clip.vision.attention.head_count", 1)
    layers = _number(meta, "clip.vision.block_count")
    width = _number(meta, "clip.vision.projection_dim")
    patch = _number(meta, "clip.vision.patch_size", 16)
    d_head, side = n_embd // n_head, size // patch
    positions_table = weights.get("v.position_embd.weight")
    per_side = int(positions_table.shape[1] ** 0.5) if positions_table is not None else side
    gf = g.Graph()
    image = g.input_tensor("f32", size, size, 3, 1, name="inp_raw")
    kernel = g.weight("f16", patch, patch, 3, n_embd)
    cur = g.binary(
        _conv2d(kernel, image, patch), _conv2d(g.weight("f16", patch, patch, 3, n_embd), image, patch), "ADD"
    )
    cur = _merge_2x2(g.permute(cur, 1, 2, 0, 3), n_embd, side)
    cur = g.binary(cur, g.weight("f32", n_embd), "ADD")
    learned = g.weight("f32", n_embd, per_side * per_side)
    if per_side != side:  # resize_position_embeddings: bilinear interpolation to the image's grid
        table = g.permute(g.reshape(learned, n_embd, per_side, per_side), 2, 0, 1, 3)
        scaled = g.Tensor("f32", (side, side, n_embd, 1), "UPSCALE", (table,))
        learned = g.cont(g.permute(scaled, 1, 2, 0, 3), n_embd, side * side)
    cur = g.binary(cur, _merge_2x2(learned, n_embd, side), "ADD")
    n_pos = side * side
    positions = g.input_tensor("i32", n_pos * 4, name="positions")
    inp_l = cur
    for _ in range(layers):
        cur = _linear(_layer_norm(inp_l, n_embd), n_embd, 3 * n_embd)
        q = g.view(cur, (d_head, n_head, n_pos), (d_head * 4, cur.nb[1]))
        k = g.view(cur, (d_head, n_head, n_pos), (d_head * 4, cur.nb[1]))
        v = g.view(cur, (d_head, n_head, n_pos), (d_head * 4, cur.nb[1]))
        q, k = g.rope(q, positions), g.rope(k, positions)
        for item in (q, k, v):
            gf.expand(item)
        q, k, v = (g.permute(item, 0, 2, 1, 3) for item in (q, k, v))
        attention = g.flash_attn_ext(q, g.cast(k, "f16"), g.cast(v, "f16"), None)
        attention = g.reshape(attention, attention.ne[0] * attention.ne[1], attention.ne[2] * attention.ne[3])
        cur = g.binary(_linear(attention, n_embd, n_embd), inp_l, "ADD")
        inp_l = cur
        hidden = g.unary(_linear(_layer_norm(cur, n_embd), n_embd, n_ff))
        inp_l = g.binary(inp_l, _linear(hidden, n_ff, n_embd), "ADD")
    if "v.post_ln.weight" in weights:
        inp_l = _layer_norm(inp_l, n_embd)
    merged = g.reshape(inp_l, n_embd * 4, n_pos // 4, 1)
    hidden = g.unary(_linear(merged, n_embd * 4, n_embd * 4))
    embeddings = _linear(hidden, n_embd * 4, width)
    embeddings.is_output = True
    gf.expand(embeddings)
    return gf

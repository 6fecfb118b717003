"""A small vision projector the pinned ``mtmd`` loads: Qwen3-VL's (``qwen3vl_merger``), as Qwen3.5 uses.

Written with the ``gguf`` package: the metadata keys and tensor names ``tools/mtmd/clip.cpp``
reads for ``PROJECTOR_TYPE_QWEN3VL`` (a ViT with 16-pixel patches over two temporal frames,
learned positions, 2x2 spatial merge, then a two-layer merger to the text model's width),
with small random weights. Every 32x32 pixels of an image become one token of the text model.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType, GGUFWriter

F32, F16 = GGMLQuantizationType.F32, GGMLQuantizationType.F16
PATCH = 16
MERGE = 2


def tensors(width: int, n_embd: int, n_ff: int, layers: int, positions: int) -> list[tuple[str, tuple, object]]:
    """(name, shape in llama.cpp's order: ne0 first, type)."""
    merged = n_embd * MERGE * MERGE
    out = [
        ("v.patch_embd.weight", (PATCH, PATCH, 3, n_embd), F16),
        ("v.patch_embd.weight.1", (PATCH, PATCH, 3, n_embd), F16),
        ("v.patch_embd.bias", (n_embd,), F32),
        ("v.position_embd.weight", (n_embd, positions), F32),
    ]
    for il in range(layers):
        p = f"v.blk.{il}."
        out += [
            (p + "attn_qkv.weight", (n_embd, 3 * n_embd), F16), (p + "attn_qkv.bias", (3 * n_embd,), F32),
            (p + "attn_out.weight", (n_embd, n_embd), F16), (p + "attn_out.bias", (n_embd,), F32),
            (p + "ln1.weight", (n_embd,), F32), (p + "ln1.bias", (n_embd,), F32),
            (p + "ln2.weight", (n_embd,), F32), (p + "ln2.bias", (n_embd,), F32),
            (p + "ffn_up.weight", (n_embd, n_ff), F16), (p + "ffn_up.bias", (n_ff,), F32),
            (p + "ffn_down.weight", (n_ff, n_embd), F16), (p + "ffn_down.bias", (n_embd,), F32),
        ]  # fmt: skip
    out += [
        ("v.post_ln.weight", (n_embd,), F32), ("v.post_ln.bias", (n_embd,), F32),
        ("mm.0.weight", (merged, merged), F16), ("mm.0.bias", (merged,), F32),
        ("mm.2.weight", (merged, width), F16), ("mm.2.bias", (width,), F32),
    ]  # fmt: skip
    return out


def write_projector(path: Path, width: int, n_embd: int = 64, n_ff: int = 128, layers: int = 2) -> Path:
    """A projector for a text model ``width`` wide (llama.cpp refuses any other width)."""
    image_size = 768
    positions = (image_size // PATCH) ** 2
    writer = GGUFWriter(str(path), "clip")
    writer.add_string("clip.projector_type", "qwen3vl_merger")
    writer.add_bool("clip.has_vision_encoder", True)
    writer.add_bool("clip.use_gelu", True)
    writer.add_uint32("clip.vision.embedding_length", n_embd)
    writer.add_uint32("clip.vision.feed_forward_length", n_ff)
    writer.add_uint32("clip.vision.block_count", layers)
    writer.add_uint32("clip.vision.attention.head_count", n_embd // 16)
    writer.add_uint32("clip.vision.projection_dim", width)
    writer.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-6)
    writer.add_uint32("clip.vision.image_size", image_size)
    writer.add_uint32("clip.vision.patch_size", PATCH)
    writer.add_uint32("clip.vision.spatial_merge_size", MERGE)
    writer.add_array("clip.vision.image_mean", [0.5, 0.5, 0.5])
    writer.add_array("clip.vision.image_std", [0.5, 0.5, 0.5])
    rng = np.random.default_rng(11)
    for name, dims, kind in tensors(width, n_embd, n_ff, layers, positions):
        values = rng.normal(0, 0.02, tuple(reversed(dims)))
        writer.add_tensor(name, values.astype(np.float16 if kind == F16 else np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return Path(path)

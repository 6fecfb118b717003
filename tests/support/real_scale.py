"""A header-only GGUF with the real Qwen3.6-35B-A3B layout (``qwen35moe``), data left as a hole.

Shapes from the released model's config: 40 layers (30 Gated DeltaNet, full attention
every 4th), hidden 2048, 16 query / 2 KV heads of 256, 256 experts (8 used) of 512,
one shared expert of 512, DeltaNet 16 key / 32 value heads of 128, conv kernel 4, a
248320-token vocabulary and one MTP block. Experts Q4_K, other matrices Q8_0: the
shape of the Q4_K_M files people run. The file is sparse: it costs no disk.
"""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path

from gguf import GGMLQuantizationType

from monitor.catalog.registry import ModelInfo, read_model_info
from tests.support.synthetic_gguf import Shape, write_model

QWEN36_35B_A3B = Shape(
    "qwen35moe", n_layer=40, nextn=1, n_embd=2048, n_head=16, n_head_kv=2, head_dim=256, n_ff=512,
    n_expert=256, n_expert_used=8, n_ff_exp=512, n_ff_shexp=512, interval=4, ssm_conv=4, ssm_state=128,
    ssm_groups=16, ssm_v_heads=32, n_vocab=248320, context_length=262144,
    expert_type=GGMLQuantizationType.Q4_K, weight_type=GGMLQuantizationType.Q8_0,
)  # fmt: skip


@functools.cache
def qwen36_35b_a3b() -> ModelInfo:
    folder = Path(tempfile.mkdtemp(prefix="qwenweb-real-scale-"))
    return read_model_info(write_model(folder / "Qwen3.6-35B-A3B-Q4_K_M.gguf", QWEN36_35B_A3B, sparse=True))

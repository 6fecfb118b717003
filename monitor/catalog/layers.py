"""Per-layer facts of a GGUF model, by llama.cpp's own rules for each architecture.

Which blocks are full attention, sliding-window, recurrent (Gated DeltaNet) or
MTP/NextN, their KV heads, and the recurrent state sizes, read from the metadata
the way the pinned llama.cpp does (``src/models/<arch>.cpp``, ``llama-hparams.cpp``).
An architecture not listed in ``COVERED`` is reported as such: its weights are
exact (they come from the tensor table) but its cache is not claimed.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from monitor.catalog.gguf_header import ArrayInfo

ATTENTION, SLIDING, RECURRENT, MTP = "attention", "sliding", "recurrent", "mtp"
# Gated DeltaNet hybrids: recurrent layers from `attention.recurrent_layers`, else every
# layer but each `full_attention_interval`-th (default 4) is recurrent.
HYBRID_DELTANET = ("qwen35moe", "qwen35", "qwen3next")
# Recurrent state snapshots for MTP rollback (`llm_arch_supports_rs_rollback`, llama-arch.cpp), among those covered.
RS_ROLLBACK = ("qwen35moe", "qwen35")
# Architectures whose cache the planner computes by llama.cpp's rules (checked against
# llama-server's buffer log in tests/integration/test_planner_architectures.py).
COVERED = (*HYBRID_DELTANET, "qwen3moe", "qwen3", "llama", "gemma3")
# (pattern, dense_first) per architecture, from llama.cpp's src/models/*.cpp, used
# when the file has a sliding window but no `sliding_window_pattern` key.
SWA_PATTERNS = {
    "gemma2": (2, False),
    "gemma3": (6, False),
    "gemma3n": (5, False),
    "gemma-embedding": (6, False),
    "cohere2": (4, False),
    "cohere2moe": (4, True),
    "exaone4": (4, False),
    "exaone-moe": (4, False),
    "olmo2": (4, False),
    "gpt-oss": (2, False),
    "afmoe": (4, False),
    "plamo3": (8, False),
    "smallthinker": (4, True),
}


@dataclass(frozen=True)
class SSMSizes:
    """The recurrent layers' sizes: each field is the metadata key ``<arch>.ssm.<field>``."""

    conv_kernel: int = 0
    inner_size: int = 0
    state_size: int = 0
    group_count: int = 0
    time_step_rank: int = 0

    @property
    def conv_values(self) -> int:
        """``n_embd_r``: the convolution state one sequence keeps per recurrent layer."""
        return max(self.conv_kernel - 1, 0) * (self.inner_size + 2 * self.group_count * self.state_size)

    @property
    def state_values(self) -> int:
        """``n_embd_s``: the DeltaNet state one sequence keeps per recurrent layer."""
        return self.state_size * self.inner_size


@dataclass
class LayerFacts:
    kinds: list[str] = field(default_factory=list)
    head_count: list[int] = field(default_factory=list)
    head_count_kv: list[int] = field(default_factory=list)
    nextn_layers: int = 0
    feed_forward: list[int] = field(default_factory=list)
    ssm: SSMSizes = field(default_factory=SSMSizes)
    covered: bool = False


class Metadata:
    """Typed reads of ``<arch>.<key>`` values, arrays per layer as well as scalars."""

    def __init__(self, metadata: dict[str, object], arch: str):
        self.metadata, self.arch = metadata, arch

    def raw(self, key: str):
        return self.metadata.get(f"{self.arch}.{key}")

    def number(self, key: str, default: int = 0) -> int:
        value = self.raw(key)
        if isinstance(value, ArrayInfo):  # per-layer values: the largest is what sizes buffers
            value = max(value.values or [default])
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return default
        return int(value)

    def per_layer(self, key: str, n_layer: int, default: int) -> list[int]:
        value = self.raw(key)
        if isinstance(value, ArrayInfo) and value.values is not None and len(value.values) >= n_layer:
            return [int(item) for item in value.values[:n_layer]]
        return [self.number(key, default)] * n_layer


def _swa_flags(meta: Metadata, n_layer: int, sliding_window: int) -> list[bool]:
    if not sliding_window:
        return [False] * n_layer
    value = meta.raw("attention.sliding_window_pattern")
    if isinstance(value, ArrayInfo) and value.values is not None:
        return ([bool(item) for item in value.values] + [False] * n_layer)[:n_layer]
    pattern, dense_first = SWA_PATTERNS.get(meta.arch, (0, False))
    if isinstance(value, int) and not isinstance(value, bool):
        pattern = value
    if pattern == 0:
        return [True] * n_layer  # every layer slides
    if dense_first:
        return [il % pattern != 0 for il in range(n_layer)]
    return [il % pattern < pattern - 1 for il in range(n_layer)]


def _recurrent_flags(meta: Metadata, block_count: int, trunk: int) -> list[bool]:
    if meta.arch not in HYBRID_DELTANET:
        return [False] * block_count
    value = meta.raw("attention.recurrent_layers")
    if isinstance(value, ArrayInfo) and value.values is not None and len(value.values) >= block_count:
        return [bool(item) for item in value.values[:block_count]]
    interval = meta.number("full_attention_interval", 4) or 4
    return [il < trunk and (il + 1) % interval != 0 for il in range(block_count)]


def layer_facts(meta: Metadata, block_count: int, sliding_window: int) -> LayerFacts:
    nextn = min(max(meta.number("nextn_predict_layers"), 0), block_count)
    trunk = block_count - nextn
    head_count = meta.per_layer("attention.head_count", block_count, 0)
    default_kv = max(head_count) if head_count else 0
    head_count_kv = meta.per_layer("attention.head_count_kv", block_count, default_kv)
    recurrent = _recurrent_flags(meta, block_count, trunk)
    sliding = _swa_flags(meta, block_count, sliding_window)
    kinds = [
        MTP if il >= trunk else RECURRENT if recurrent[il] else SLIDING if sliding[il] else ATTENTION
        for il in range(block_count)
    ]
    ssm = SSMSizes(**{size.name: meta.number(f"ssm.{size.name}") for size in fields(SSMSizes)})
    feed_forward = meta.per_layer("feed_forward_length", block_count, 0)
    return LayerFacts(kinds, head_count, head_count_kv, nextn, feed_forward, ssm, meta.arch in COVERED)

"""Small GGUF files of each architecture the planner covers, for loading in the real llama-server.

Metadata keys and tensor names/shapes are the ones llama.cpp's loader reads
(``src/models/<arch>.cpp`` of the pinned build); the weights are zeros (or what a ``fill``
function writes: small random values, a wired model), the vocabulary a tiny SentencePiece one llama.cpp accepts,
or a real tokenizer and chat template copied from the pinned llama.cpp tree
(``llama_tree.py``: Qwen3.5's ``models/ggml-vocab-qwen35.gguf`` and
``models/templates/Qwen3.5-4B.jinja``). ``sparse=True`` writes the header and leaves the
data as a hole (a real-scale layout that costs no disk).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType, GGUFWriter
from gguf.constants import GGML_QUANT_SIZES

F32, F16, Q8_0 = GGMLQuantizationType.F32, GGMLQuantizationType.F16, GGMLQuantizationType.Q8_0
HYBRID = ("qwen35moe", "qwen35", "qwen3next")
MOE = ("qwen35moe", "qwen3moe", "qwen3next")


@dataclass
class Shape:
    arch: str
    n_layer: int = 8  # trunk layers
    nextn: int = 0  # MTP blocks appended after the trunk
    n_embd: int = 128
    n_head: int = 4
    n_head_kv: int = 2
    head_dim: int = 64
    n_ff: int = 256
    n_expert: int = 8
    n_expert_used: int = 2
    n_ff_exp: int = 64
    n_ff_shexp: int = 64
    interval: int = 4  # full attention every Nth layer (hybrids)
    ssm_conv: int = 4
    ssm_state: int = 32
    ssm_groups: int = 2
    ssm_v_heads: int = 4
    n_vocab: int = 512
    sliding_window: int = 128
    context_length: int = 32768
    expert_type: GGMLQuantizationType = F16
    weight_type: GGMLQuantizationType = F16  # every other matrix
    extra: dict = field(default_factory=dict)
    tokenizer: dict | None = None  # tokenizer.* keys of a real vocabulary (``read_tokenizer``); None: a tiny one
    chat_template: str | None = None
    fill: Callable[[str, tuple[int, ...], GGMLQuantizationType], bytes | None] | None = (
        None  # a tensor's data; None: zeros
    )
    tied_output: bool = False  # no output.weight: llama.cpp reuses token_embd
    # A reranker's labels: a classification head (cls.output) and rank pooling in its metadata.
    classifier: tuple[str, ...] = ()

    @property
    def block_count(self) -> int:
        return self.n_layer + self.nextn

    def is_recurrent(self, il: int) -> bool:
        return self.arch in HYBRID and il < self.n_layer and (il + 1) % self.interval != 0


def _metadata(writer: GGUFWriter, s: Shape) -> None:
    a = s.arch
    writer.add_uint32(f"{a}.block_count", s.block_count)
    writer.add_uint32(f"{a}.context_length", s.context_length)
    writer.add_uint32(f"{a}.embedding_length", s.n_embd)
    writer.add_uint32(f"{a}.feed_forward_length", s.n_ff)
    writer.add_uint32(f"{a}.attention.head_count", s.n_head)
    writer.add_uint32(f"{a}.attention.head_count_kv", s.n_head_kv)
    writer.add_uint32(f"{a}.attention.key_length", s.head_dim)
    writer.add_uint32(f"{a}.attention.value_length", s.head_dim)
    writer.add_float32(f"{a}.attention.layer_norm_rms_epsilon", 1e-6)
    writer.add_float32(f"{a}.rope.freq_base", 10000.0)
    if a in MOE:
        writer.add_uint32(f"{a}.expert_count", s.n_expert)
        writer.add_uint32(f"{a}.expert_used_count", s.n_expert_used)
        writer.add_uint32(f"{a}.expert_feed_forward_length", s.n_ff_exp)
        if a != "qwen3moe":
            writer.add_uint32(f"{a}.expert_shared_feed_forward_length", s.n_ff_shexp)
    if a in HYBRID:
        writer.add_uint32(f"{a}.rope.dimension_count", s.head_dim // 2)
        writer.add_array(f"{a}.rope.dimension_sections", [6, 5, 5, 0])
        writer.add_uint32(f"{a}.ssm.conv_kernel", s.ssm_conv)
        writer.add_uint32(f"{a}.ssm.state_size", s.ssm_state)
        writer.add_uint32(f"{a}.ssm.group_count", s.ssm_groups)
        writer.add_uint32(f"{a}.ssm.time_step_rank", s.ssm_v_heads)
        writer.add_uint32(f"{a}.ssm.inner_size", s.ssm_v_heads * s.ssm_state)
        writer.add_uint32(f"{a}.full_attention_interval", s.interval)
    if s.nextn:
        writer.add_uint32(f"{a}.nextn_predict_layers", s.nextn)
    if a == "gemma3":
        writer.add_uint32(f"{a}.attention.sliding_window", s.sliding_window)
    if s.classifier:
        writer.add_uint32(f"{a}.pooling_type", 4)  # LLAMA_POOLING_TYPE_RANK
        writer.add_array(f"{a}.classifier.output_labels", list(s.classifier))
    for key, value in s.extra.items():
        writer.add_uint32(f"{a}.{key}", value) if isinstance(value, int) else writer.add_array(f"{a}.{key}", value)
    if s.chat_template is not None:
        writer.add_chat_template(s.chat_template)
    if s.tokenizer is not None:
        _copy_tokenizer(writer, s.tokenizer)
        return
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    tokens += [f"▁t{i}" for i in range(s.n_vocab - len(tokens))]
    types = [2, 3, 3] + [6] * 256 + [1] * (s.n_vocab - 259)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores([0.0] * s.n_vocab)
    writer.add_token_types(types)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)


_SCALAR_KINDS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


def read_tokenizer(data: bytes) -> dict:
    """The ``tokenizer.*`` metadata of a GGUF vocabulary file's bytes, strings and arrays whole
    (``gguf.GGUFReader`` takes seconds over a 150k-token vocabulary; this reads it at once)."""
    offset = 24  # magic, version, tensor count, key count
    n_kv = struct.unpack_from("<Q", data, 16)[0]

    def string() -> str:
        nonlocal offset
        length = struct.unpack_from("<Q", data, offset)[0]
        offset += 8 + length
        return data[offset - length : offset].decode("utf-8")

    def value(kind: int):
        nonlocal offset
        if kind == 8:
            return string()
        if kind == 9:
            item_kind, length = struct.unpack_from("<IQ", data, offset)
            offset += 12
            if item_kind == 8:
                return [string() for _ in range(length)]
            fmt = _SCALAR_KINDS[item_kind]
            values = list(struct.unpack_from(f"<{length}{fmt}", data, offset))
            offset += struct.calcsize(fmt) * length
            return values
        fmt = _SCALAR_KINDS[kind]
        result = struct.unpack_from("<" + fmt, data, offset)[0]
        offset += struct.calcsize(fmt)
        return result

    found = {}
    for _ in range(n_kv):
        key = string()
        kind = struct.unpack_from("<I", data, offset)[0]
        offset += 4
        item = value(kind)
        if key.startswith("tokenizer.") and key != "tokenizer.chat_template":
            found[key] = item
    return found


def _copy_tokenizer(writer: GGUFWriter, tokenizer: dict) -> None:
    writer.add_tokenizer_model(tokenizer["tokenizer.ggml.model"])
    if "tokenizer.ggml.pre" in tokenizer:
        writer.add_tokenizer_pre(tokenizer["tokenizer.ggml.pre"])
    writer.add_token_list(tokenizer["tokenizer.ggml.tokens"])
    writer.add_token_types(tokenizer["tokenizer.ggml.token_type"])
    if "tokenizer.ggml.merges" in tokenizer:
        writer.add_token_merges(tokenizer["tokenizer.ggml.merges"])
    for key in ("eos", "bos", "padding"):
        if f"tokenizer.ggml.{key}_token_id" in tokenizer:
            writer.add_uint32(f"tokenizer.ggml.{key}_token_id", tokenizer[f"tokenizer.ggml.{key}_token_id"])


def vocab_size(s: Shape) -> int:
    return len(s.tokenizer["tokenizer.ggml.tokens"]) if s.tokenizer is not None else s.n_vocab


def tensors(s: Shape) -> list[tuple[str, tuple[int, ...], GGMLQuantizationType]]:
    """(name, shape in llama.cpp's order: ne0 first, type)."""
    n_vocab = vocab_size(s)
    out = [("token_embd.weight", (s.n_embd, n_vocab), s.weight_type), ("output_norm.weight", (s.n_embd,), F32)]
    if not s.tied_output:
        out.append(("output.weight", (s.n_embd, n_vocab), s.weight_type))
    if s.classifier:
        out.append(("cls.output.weight", (s.n_embd, len(s.classifier)), F32))
    for il in range(s.block_count):
        out += [
            (name, dims, s.weight_type if kind == F16 else kind) for name, dims, kind in _block(s, il, il >= s.n_layer)
        ]
    return out


def _block(s: Shape, il: int, mtp: bool) -> list:
    e, hd, p = s.n_embd, s.head_dim, f"blk.{il}."
    hybrid = s.arch in HYBRID
    rows = [(p + "attn_norm.weight", (e,), F32)]
    rows.append((p + ("post_attention_norm.weight" if hybrid else "ffn_norm.weight"), (e,), F32))
    if s.is_recurrent(il):
        key_dim, value_dim = s.ssm_state * s.ssm_groups, s.ssm_state * s.ssm_v_heads
        rows += [
            (p + "attn_qkv.weight", (e, key_dim * 2 + value_dim), F16),
            (p + "attn_gate.weight", (e, value_dim), F16),
            (p + "ssm_conv1d.weight", (s.ssm_conv, key_dim * 2 + value_dim), F32),
            (p + "ssm_dt.bias", (s.ssm_v_heads,), F32),
            (p + "ssm_a", (s.ssm_v_heads,), F32),
            (p + "ssm_norm.weight", (s.ssm_state,), F32),
            (p + "ssm_out.weight", (value_dim, e), F16),
        ]
        if s.arch == "qwen3next":
            rows.append((p + "ssm_ba.weight", (e, 2 * s.ssm_v_heads), F16))
        else:
            rows += [
                (p + "ssm_beta.weight", (e, s.ssm_v_heads), F16),
                (p + "ssm_alpha.weight", (e, s.ssm_v_heads), F16),
            ]
    else:
        q = s.n_head * hd * (2 if hybrid else 1)
        rows += [
            (p + "attn_q.weight", (e, q), F16),
            (p + "attn_k.weight", (e, s.n_head_kv * hd), F16),
            (p + "attn_v.weight", (e, s.n_head_kv * hd), F16),
            (p + "attn_output.weight", (s.n_head * hd, e), F16),
        ]
        if s.arch != "llama":
            rows += [(p + "attn_q_norm.weight", (hd,), F32), (p + "attn_k_norm.weight", (hd,), F32)]
        if s.arch == "gemma3":
            rows += [(p + "post_attention_norm.weight", (e,), F32), (p + "post_ffw_norm.weight", (e,), F32)]
    if s.arch in MOE:
        rows += [
            (p + "ffn_gate_inp.weight", (e, s.n_expert), F32),
            (p + "ffn_gate_exps.weight", (e, s.n_ff_exp, s.n_expert), s.expert_type),
            (p + "ffn_up_exps.weight", (e, s.n_ff_exp, s.n_expert), s.expert_type),
            (p + "ffn_down_exps.weight", (s.n_ff_exp, e, s.n_expert), s.expert_type),
        ]
        if s.arch != "qwen3moe":
            rows += [
                (p + "ffn_gate_inp_shexp.weight", (e,), F32),
                (p + "ffn_gate_shexp.weight", (e, s.n_ff_shexp), F16),
                (p + "ffn_up_shexp.weight", (e, s.n_ff_shexp), F16),
                (p + "ffn_down_shexp.weight", (s.n_ff_shexp, e), F16),
            ]
    else:
        rows += [
            (p + "ffn_gate.weight", (e, s.n_ff), F16),
            (p + "ffn_up.weight", (e, s.n_ff), F16),
            (p + "ffn_down.weight", (s.n_ff, e), F16),
        ]
    if mtp:
        rows += [
            (p + "nextn.eh_proj.weight", (2 * e, e), F16),
            (p + "nextn.enorm.weight", (e,), F32),
            (p + "nextn.hnorm.weight", (e,), F32),
            (p + "nextn.shared_head_norm.weight", (e,), F32),
        ]
    return rows


def _n_bytes(shape: tuple[int, ...], kind: GGMLQuantizationType) -> int:
    block, size = GGML_QUANT_SIZES[kind]
    return int(np.prod(shape)) // block * size


def encode(values: np.ndarray, kind: GGMLQuantizationType) -> bytes:
    """``values`` (float, ne0 fastest) in a tensor's own encoding: F32, F16 or Q8_0 (blocks of 32 and a scale)."""
    flat = np.asarray(values, dtype=np.float32).ravel()
    if kind == F32:
        return flat.tobytes()
    if kind == F16:
        return flat.astype(np.float16).tobytes()
    if kind == Q8_0:
        blocks = flat.reshape(-1, 32)
        scale = np.abs(blocks).max(axis=1) / 127
        out = np.zeros(len(blocks), dtype=[("d", np.float16), ("q", np.int8, 32)])
        out["d"] = scale.astype(np.float16)
        safe = np.where(scale > 0, scale, 1)[:, None]
        out["q"] = np.clip(np.rint(blocks / safe), -127, 127).astype(np.int8)
        return out.tobytes()
    raise ValueError(f"no encoder for {kind.name}")


def random_fill(seed: int = 7) -> Callable[[str, tuple[int, ...], GGMLQuantizationType], bytes]:
    """Small random weights: norms near one, DeltaNet's decay negative (or its state grows without bound)."""
    rng = np.random.default_rng(seed)

    def fill(name: str, dims: tuple[int, ...], kind: GGMLQuantizationType) -> bytes:
        count = int(np.prod(dims))
        if name.endswith(".ssm_a"):
            return encode(np.full(count, -1.0), kind)
        if kind == F32:
            return encode(1.0 + rng.normal(0, 0.05, count), kind)
        return encode(rng.normal(0, 0.05, count), kind)

    return fill


def write_model(path: Path, shape: Shape, sparse: bool = False) -> Path:
    """Write ``shape`` as a GGUF file at ``path``; zeros (or what its ``fill`` writes), or a hole when ``sparse``."""
    writer = GGUFWriter(str(path), shape.arch)
    _metadata(writer, shape)
    specs = tensors(shape)
    for name, dims, kind in specs:
        n_bytes = _n_bytes(dims, kind)
        writer.add_tensor_info(name, tuple(reversed(dims)), np.dtype(np.float32), n_bytes, raw_dtype=kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    writer.close()
    alignment = 32
    with Path(path).open("r+b") as handle:
        handle.seek(0, 2)
        start = -(-handle.tell() // alignment) * alignment
        total = start
        for _, dims, kind in specs:
            total += -(-_n_bytes(dims, kind) // alignment) * alignment
        if sparse:
            handle.truncate(total)
        elif shape.fill is not None:
            handle.write(b"\0" * (start - handle.tell()))
            for name, dims, kind in specs:
                block = shape.fill(name, dims, kind) or bytes(_n_bytes(dims, kind))
                handle.write(block + b"\0" * (-len(block) % alignment))
        else:
            handle.write(b"\0" * (total - handle.tell()))
    return Path(path)


def write_reranker(path: Path) -> Path:
    """A small qwen3 reranker llama-server serves with ``--reranking``: small random weights, a
    classification head over two labels (what Qwen3-Reranker's conversion gives) and rank pooling."""
    return write_model(path, Shape(arch="qwen3", n_layer=2, classifier=("yes", "no"), fill=random_fill()))

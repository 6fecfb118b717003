"""The GGUF files in the models directory and what their metadata says.

Read from the header and tensor table only (``gguf_header``): the weights are never loaded.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from gguf.constants import LlamaFileType

from monitor.catalog import clip_graph
from monitor.catalog.gguf_header import HeaderError, read_header
from monitor.catalog.layers import ATTENTION, MTP, RECURRENT, SLIDING, LayerFacts, Metadata, layer_facts

SHARD_PATTERN = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$")
# The tensors `--n-cpu-moe N` keeps on the CPU: llama.cpp's LLM_FFN_EXPS_REGEX (common/common.h),
# searched in each name after `blk\.<i>` for the first N blocks.
CPU_MOE_TENSOR = re.compile(r"\.ffn_(up|down|gate|gate_up)_(ch|)exps")


class NotGGUF(ValueError):
    """The file is not a readable GGUF model."""


@dataclass
class ModelInfo:
    path: Path
    file_size: int
    architecture: str
    name: str
    quantization: str
    parameters: int
    n_layer: int
    context_length: int
    n_embd: int
    n_head: int
    n_head_kv: int
    head_dim_k: int
    head_dim_v: int
    sliding_window: int
    swa_layers: list[bool]
    expert_count: int
    expert_used_count: int
    vocab_size: int
    has_chat_template: bool
    mmproj: Path | None
    # Bytes of the weights by where llama.cpp places them.
    layer_bytes: list[int] = field(default_factory=list)
    layer_expert_bytes: list[int] = field(default_factory=list)  # the part --n-cpu-moe keeps on the CPU
    input_bytes: int = 0  # token embeddings: always in host memory
    output_bytes: int = 0  # output norm + output matrix: offloaded with the last layer
    tied_output: bool = False  # no output matrix: llama.cpp reuses (and, offloaded, copies) token_embd
    facts: LayerFacts = field(default_factory=LayerFacts)
    expert_shared_count: int = 0
    expert_ff: int = 0
    shared_expert_ff: int = 0

    @property
    def layer_kinds(self) -> list[str]:
        return self.facts.kinds

    @property
    def nextn_layers(self) -> int:
        return self.facts.nextn_layers

    @property
    def trunk_layers(self) -> int:
        """Blocks the main pass runs: all but the MTP/NextN blocks at the end."""
        return self.n_layer - self.facts.nextn_layers

    @property
    def covered(self) -> bool:
        return self.facts.covered

    @property
    def recurrent_layers(self) -> int:
        return self.facts.kinds.count(RECURRENT)

    @property
    def layer_counts(self) -> dict[str, int]:
        return {kind: self.facts.kinds.count(kind) for kind in (ATTENTION, SLIDING, RECURRENT, MTP)}

    @property
    def has_shared_experts(self) -> bool:
        return self.expert_shared_count > 0 or self.shared_expert_ff > 0

    def kv_heads(self, il: int) -> int:
        return self.facts.head_count_kv[il] if il < len(self.facts.head_count_kv) else self.n_head_kv

    @property
    def is_moe(self) -> bool:
        return self.expert_count > 0


def quantization_name(file_type: int | None) -> str:
    if file_type is None:
        return "unknown"
    try:
        return LlamaFileType(file_type).name.removeprefix("MOSTLY_")
    except ValueError:
        return f"type {file_type}"


def _projection_width(path: Path) -> int | None:
    try:
        value = read_header(path).metadata.get("clip.vision.projection_dim")
    except (HeaderError, OSError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def projector_bytes(path: Path) -> tuple[int, int]:
    """(weights, compute buffer) of a vision projector: its tensors, and ``clip_graph.warmup_bytes``."""
    header = read_header(path)
    weights = sum(tensor.n_bytes for tensor in header.tensors)
    return weights, clip_graph.warmup_bytes(header)


def find_mmproj(path: Path, n_embd: int = 0) -> Path | None:
    """The vision projector beside ``path`` that fits it: llama.cpp refuses a projector whose output
    width is not the text model's n_embd, so one declaring another width is never paired. Among
    those left, the one sharing the longest name prefix with the model."""
    candidates = []
    for candidate in sorted(path.parent.glob("*.gguf")):
        if candidate == path or not candidate.name.lower().startswith("mmproj"):
            continue
        width = _projection_width(candidate)
        if width is not None and n_embd and width != n_embd:
            continue
        name = candidate.name.lower().removeprefix("mmproj").lstrip("-_.")
        shared = len(os.path.commonprefix([name, path.name.lower()]))
        candidates.append((-shared, candidate))
    return min(candidates)[1] if candidates else None


def read_model_info(path: Path) -> ModelInfo:
    path = Path(path)
    try:
        header = read_header(path)
    except HeaderError as error:
        if str(error) == "not a GGUF file":
            raise NotGGUF(f"{path.name} is not a GGUF file") from error
        raise NotGGUF(f"{path.name}: the GGUF header cannot be read ({error})") from error
    if header.tensors and header.data_end > header.file_size:
        raise NotGGUF(
            f"{path.name} is truncated: its tensors need {header.data_end} bytes, the file has {header.file_size}"
        )
    meta = header.metadata
    arch = str(meta.get("general.architecture", "unknown"))
    number = Metadata(meta, arch).number

    n_layer = number("block_count")
    n_embd = number("embedding_length")
    n_head = number("attention.head_count")
    n_head_kv = number("attention.head_count_kv", n_head)
    head_dim = n_embd // n_head if n_head else 0
    sliding_window = number("attention.sliding_window")
    facts = layer_facts(Metadata(meta, arch), n_layer, sliding_window)

    layer_bytes = [0] * n_layer
    expert_bytes = [0] * n_layer
    input_bytes = output_bytes = parameters = 0
    names = {tensor.name for tensor in header.tensors}
    for tensor in header.tensors:
        size = tensor.n_bytes
        parameters += tensor.n_elements
        match = re.match(r"blk\.(\d+)\.", tensor.name)
        if match and int(match.group(1)) < n_layer:
            il = int(match.group(1))
            layer_bytes[il] += size
            if CPU_MOE_TENSOR.search(tensor.name):
                expert_bytes[il] += size
        elif tensor.name.startswith(("token_embd", "per_layer_token_embd")):
            input_bytes += size
        else:
            output_bytes += size
    return ModelInfo(
        path=path,
        file_size=path.stat().st_size,
        architecture=arch,
        name=str(meta.get("general.name", path.stem)),
        quantization=quantization_name(meta.get("general.file_type")),
        parameters=parameters,
        n_layer=n_layer,
        context_length=number("context_length"),
        n_embd=n_embd,
        n_head=n_head,
        n_head_kv=n_head_kv,
        head_dim_k=number("attention.key_length", head_dim),
        head_dim_v=number("attention.value_length", head_dim),
        sliding_window=sliding_window,
        swa_layers=[kind == SLIDING for kind in facts.kinds],
        expert_count=number("expert_count"),
        expert_used_count=number("expert_used_count"),
        vocab_size=getattr(meta.get("tokenizer.ggml.tokens"), "length", 0),
        has_chat_template="tokenizer.chat_template" in meta,
        mmproj=find_mmproj(path, n_embd),
        layer_bytes=layer_bytes,
        layer_expert_bytes=expert_bytes,
        input_bytes=input_bytes,
        output_bytes=output_bytes,
        tied_output="output.weight" not in names,
        facts=facts,
        expert_shared_count=number("expert_shared_count"),
        expert_ff=number("expert_feed_forward_length"),
        shared_expert_ff=number("expert_shared_feed_forward_length"),
    )


def scan_models(models_dir: Path) -> tuple[list[ModelInfo], list[tuple[Path, str]]]:
    """(readable models, [(file, why it was skipped)]) under ``models_dir``.

    Vision projectors are listed with their model, and shards after the first
    belong to their set.
    """
    models, skipped = [], []
    for path in sorted(Path(models_dir).rglob("*.gguf")):
        shard = SHARD_PATTERN.search(path.name)
        if path.name.lower().startswith("mmproj") or (shard and shard.group(1) != "00001"):
            continue
        try:
            models.append(read_model_info(path))
        except (NotGGUF, OSError) as error:
            skipped.append((path, str(error)))
    return models, skipped

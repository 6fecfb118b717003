"""A small ``qwen35moe`` model for the real llama-server: the product's model family on a CPU.

Gated DeltaNet layers with full attention every 4th, routed and shared experts and an MTP
block, with Qwen3.5's own tokenizer and chat template from the pinned llama.cpp tree, so
llama-server's template engine, reasoning and tool-call parsers, speculative (MTP) loop and
image encoder run on this architecture as they do for Qwen3.6-35B-A3B. The weights are small
random values: what it writes is noise, so tests force what they need with a grammar.
"""

from __future__ import annotations

import functools
from pathlib import Path

from tests.support.llama_tree import tree_file
from tests.support.synthetic_gguf import Q8_0, Shape, read_tokenizer, write_model

TEMPLATE = "models/templates/Qwen3.5-4B.jinja"
VOCAB = "models/ggml-vocab-qwen35.gguf"
MODEL_FILE = "qwen35moe-tiny-Q8_0.gguf"


@functools.cache
def tokenizer() -> dict:
    return read_tokenizer(tree_file(VOCAB))


def chat_template() -> str:
    return tree_file(TEMPLATE).decode("utf-8")


def shape(**changes) -> Shape:
    """4 trunk layers (3 DeltaNet, 1 attention) and one MTP block, 128 wide, 8 experts."""
    values = dict(
        n_layer=4, nextn=1, tokenizer=tokenizer(), chat_template=chat_template(), random_weights=True,
        tied_output=True, context_length=262144, weight_type=Q8_0, expert_type=Q8_0,
    )  # fmt: skip
    values.update(changes)
    return Shape("qwen35moe", **values)


def write_qwen35(folder: Path, name: str = MODEL_FILE, **changes) -> Path:
    """The model file in ``folder`` (written once: the same bytes each time)."""
    path = Path(folder) / name
    if not path.exists():
        partial = path.with_suffix(".part")
        write_model(partial, shape(**changes))
        partial.rename(path)
    return path

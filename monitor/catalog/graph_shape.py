"""What a llama.cpp graph's tensor shapes depend on: the model's dimensions and the context's settings."""

from __future__ import annotations

from dataclasses import dataclass

from monitor.catalog.layers import SSMSizes


@dataclass(frozen=True)
class Shape:
    """What a graph's tensor shapes depend on, read from the GGUF header (``from_model``)."""

    arch: str
    kinds: tuple[str, ...]  # per trunk layer: attention, sliding, recurrent
    n_embd: int
    n_head: tuple[int, ...]
    n_head_kv: tuple[int, ...]
    head_k: int
    head_v: int
    n_ff: tuple[int, ...]
    n_vocab: int
    n_expert: int = 0
    n_expert_used: int = 0
    n_ff_exp: int = 0
    n_ff_shexp: int = 0
    ssm: SSMSizes = SSMSizes()
    nextn: int = 0

    @property
    def n_embd_r(self) -> int:
        return self.ssm.conv_values

    @property
    def n_embd_s(self) -> int:
        return self.ssm.state_values


@dataclass(frozen=True)
class Context:
    """The context settings a reserve depends on."""

    n_ctx: int  # the context's cells, all streams (n_ctx padded)
    n_ctx_seq: int  # KV cells per stream (the whole cache of a stream, as the reserve sees it)
    n_seq: int  # n_seq_max: llama-server's slots
    n_ubatch: int = 512
    n_outputs: int = 1  # rows of logits of the largest micro-batch (llama-server: slots x (1 + draft))
    kv_unified: bool = False
    swa_cells: int = 0  # cells of a sliding-window layer's stream
    type_k: str = "f16"
    type_v: str = "f16"
    rs_snapshots: int = 0  # n_rs_seq: recurrent states kept per sequence for MTP rollback

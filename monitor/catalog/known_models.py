"""Well-known embedding and reranking GGUFs the Models page names for staff to download.

Each is a file in a public Hugging Face repository that llama-server serves as it is: embedders with
``--embeddings`` and their pooling, rerankers (a classification head, ``cls.output``, and rank pooling in
their metadata) with ``--reranking``. The download verifies what it can: the SHA256 given here where it
is known (else the one the download computes is recorded), and the GGUF header.
"""

from __future__ import annotations

from dataclasses import dataclass

from monitor.models import ServerProfile

HF = "https://huggingface.co"


@dataclass(frozen=True)
class KnownModel:
    title: str
    kind: str  # ServerProfile.Kind
    pooling: str  # the --pooling an embeddings profile of it takes ("" for a reranker: rank)
    repository: str  # owner/name on Hugging Face
    file: str
    sha256: str = ""  # "" where no published hash is known here: the download records the one it computes

    @property
    def url(self) -> str:
        return f"{HF}/{self.repository}/resolve/main/{self.file}"

    @property
    def page(self) -> str:
        return f"{HF}/{self.repository}"

    @property
    def kind_label(self) -> str:
        return str(ServerProfile.Kind(self.kind).label)


EMBEDDING = ServerProfile.Kind.EMBEDDING
RERANK = ServerProfile.Kind.RERANK

KNOWN_MODELS: tuple[KnownModel, ...] = (
    KnownModel(
        "Qwen3-Embedding-0.6B (Q8_0)", EMBEDDING, "last", "Qwen/Qwen3-Embedding-0.6B-GGUF",
        "Qwen3-Embedding-0.6B-Q8_0.gguf", "06507c7b42688469c4e7298b0a1e16deff06caf291cf0a5b278c308249c3e439",
    ),
    KnownModel("bge-m3 (Q8_0)", EMBEDDING, "cls", "gpustack/bge-m3-GGUF", "bge-m3-Q8_0.gguf"),
    KnownModel(
        "bge-reranker-v2-m3 (Q8_0)", RERANK, "", "gpustack/bge-reranker-v2-m3-GGUF", "bge-reranker-v2-m3-Q8_0.gguf"
    ),
    KnownModel(
        "Qwen3-Reranker-0.6B (Q8_0)", RERANK, "", "ggml-org/Qwen3-Reranker-0.6B-Q8_0-GGUF",
        "qwen3-reranker-0.6b-q8_0.gguf",
    ),
)  # fmt: skip

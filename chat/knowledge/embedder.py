"""The embedding (and reranking) profiles knowledge bases use, and their calls through the fair queue:
a document's passages as background work, a person's question at person priority."""

from __future__ import annotations

from dataclasses import dataclass

import orjson
from django.conf import settings

from monitor.public import Priority, ServerProfile, ServingPool, model_sha256, serving_pool


@dataclass(frozen=True)
class Embedder:
    profile: ServerProfile
    sha256: str

    @property
    def model_file(self) -> str:
        return self.profile.model_file


def _profile(name: str, kind: str) -> ServerProfile | None:
    profiles = ServerProfile.objects.filter(kind=kind)
    return (profiles.filter(name=name).first() if name else None) or profiles.order_by("name").first()


def embedder() -> Embedder | None:
    """The profile that makes the vectors (``KNOWLEDGE_EMBED_PROFILE``, else the first embeddings one)."""
    profile = _profile(settings.KNOWLEDGE_EMBED_PROFILE, ServerProfile.Kind.EMBEDDING)
    return Embedder(profile, model_sha256(profile)) if profile else None


def reranker() -> ServerProfile | None:
    return _profile(settings.KNOWLEDGE_RERANK_PROFILE, ServerProfile.Kind.RERANK)


async def embed(pool: ServingPool, owner: str, texts: list[str], priority: Priority) -> list[list[float]]:
    """One vector per text, in order."""
    async with pool.slot(owner, priority=priority) as slot:
        raw = await slot.post_raw("/v1/embeddings", {"input": texts, "encoding_format": "float"})
    data = sorted(orjson.loads(raw)["data"], key=lambda item: item["index"])
    return [item["embedding"] for item in data]


async def rerank(profile: ServerProfile, owner: str, question: str, texts: list[str]) -> list[float]:
    """The reranker's score of each text for the question, in order."""
    pool = await serving_pool(profile)
    async with pool.slot(owner, priority="person") as slot:
        raw = await slot.post_raw("/v1/rerank", {"query": question, "documents": texts, "top_n": len(texts)})
    scores = [0.0] * len(texts)
    for result in orjson.loads(raw)["results"]:
        scores[result["index"]] = float(result["relevance_score"])
    return scores

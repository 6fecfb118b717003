"""The embedding (and reranking) profiles knowledge bases use, and their calls through the fair queue:
a document's passages as background work, a person's question at person priority."""

from __future__ import annotations

from dataclasses import dataclass

import orjson
from asgiref.sync import sync_to_async
from django.conf import settings

from chat.usage import services as ledger
from chat.usage.entries import knowledge_entry
from monitor.public import Priority, ServerProfile, ServingPool, ServingSlot, model_sha256, serving_pool


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


async def _post(slot: ServingSlot, owner: str, path: str, body: dict) -> dict:
    """One request on the slot; its row in the usage ledger for the person it is done for (``owner``: their
    id, or the documents' ``owner:<id>``), the prompt tokens llama-server counted."""
    answer: dict = {}
    try:
        answer = orjson.loads(await slot.post_raw(path, body))
        return answer
    finally:
        person = owner.removeprefix("owner:")
        if person.isdigit():
            tokens = int((answer.get("usage") or {}).get("prompt_tokens") or 0)
            await sync_to_async(ledger.record)(knowledge_entry(int(person), slot, tokens))


async def embed(pool: ServingPool, owner: str, texts: list[str], priority: Priority) -> list[list[float]]:
    """One vector per text, in order."""
    async with pool.slot(owner, priority=priority) as slot:
        answer = await _post(slot, owner, "/v1/embeddings", {"input": texts, "encoding_format": "float"})
    data = sorted(answer["data"], key=lambda item: item["index"])
    return [item["embedding"] for item in data]


async def rerank(profile: ServerProfile, owner: str, question: str, texts: list[str]) -> list[float]:
    """The reranker's score of each text for the question, in order."""
    pool = await serving_pool(profile)
    async with pool.slot(owner, priority="person") as slot:
        answer = await _post(slot, owner, "/v1/rerank", {"query": question, "documents": texts, "top_n": len(texts)})
    scores = [0.0] * len(texts)
    for result in answer["results"]:
        scores[result["index"]] = float(result["relevance_score"])
    return scores

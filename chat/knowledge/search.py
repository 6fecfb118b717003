"""Retrieval over the collections a person asks: words and meaning fused, then the reranker.

1. The collections asked are narrowed to those the person may read (``readable_collections``, asked
   again at every search: an unshared collection is gone from the next one), before anything is ranked.
2. Words: the passages' FTS5 table ranked by bm25 (the top ``KNOWLEDGE_CANDIDATES``).
3. Meaning: the question embedded by the embeddings profile (at person priority in its fair queue),
   the passages' vectors of collections indexed by that same model ranked by cosine similarity; those
   under ``KNOWLEDGE_MIN_SIMILARITY`` are not candidates.
4. Reciprocal rank fusion (k = 60) of the two lists; then, when a reranking profile exists, its scores
   order them, and those under ``KNOWLEDGE_MIN_RERANK_SCORE`` are dropped.
An empty result means nothing relevant was found, and the caller says so.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from asgiref.sync import sync_to_async
from django.conf import settings

from chat.knowledge.embedder import embed, embedder, rerank, reranker
from chat.knowledge.models import Collection, KnowledgePassage
from chat.knowledge.selectors import readable_collections
from chat.knowledge.vectors import lexical, nearest, unit
from monitor.public import LlamaError, LoadFailed, QueueUnavailable, serving_pool

RRF_K = 60


@dataclass(frozen=True)
class Found:
    passage_id: int
    collection: str
    document: str
    page: int
    text: str
    score: float
    document_id: str = ""
    kind: str = ""
    similarity: float | None = None  # cosine with the question, when its vector was among the nearest


def fuse(*rankings: list[int], k: int = RRF_K) -> list[tuple[int, float]]:
    """Reciprocal rank fusion: each list gives 1 / (k + rank) to its items (rank from 1)."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda pair: (-pair[1], pair[0]))


def _allowed(user, collection_ids: list[int]) -> list[Collection]:
    return list(readable_collections(user).filter(pk__in=collection_ids))


def _found(ids_scores: list[tuple[int, float]]) -> list[Found]:
    rows = KnowledgePassage.objects.select_related("document", "collection").in_bulk([pk for pk, _s in ids_scores])
    return [
        Found(
            pk,
            rows[pk].collection.name,
            rows[pk].document.name,
            rows[pk].page,
            rows[pk].text,
            score,
            str(rows[pk].document_id),
            rows[pk].document.kind,
        )
        for pk, score in ids_scores
        if pk in rows
    ]


async def _question_vector(user, question: str, collections: list[Collection]):
    """The question's vector and the collections whose vectors it may be compared with."""
    model = await sync_to_async(embedder)()
    if model is None:
        return None, []
    same = [
        c.pk for c in collections if c.embed_model_file == model.model_file and c.embed_model_sha256 == model.sha256
    ]
    if not same:
        return None, []
    try:
        pool = await serving_pool(model.profile)
        vectors = await embed(pool, str(user.pk), [question], "person")
    except (LoadFailed, LlamaError, QueueUnavailable):
        return None, []  # the words still answer
    return unit(vectors[0]), same


@dataclass(frozen=True)
class Retrieved:
    """A search's passages and how they were judged: ``reranked`` by a reranker (whose floor they
    passed), else ``compared`` when the question's vector met theirs (each passage's ``similarity``)."""

    found: list[Found]
    compared: bool = False
    reranked: bool = False


async def search(user, collection_ids: list[int], question: str, k: int = 5, *, hybrid: bool = True) -> list[Found]:
    """The ``k`` best passages for the question from the collections asked that the person may read
    (``hybrid=False``: by their words alone); empty when nothing relevant is found."""
    return (await retrieve(user, collection_ids, question, k, hybrid=hybrid)).found


async def retrieve(user, collection_ids: list[int], question: str, k: int = 5, *, hybrid: bool = True) -> Retrieved:
    """``search``, saying how its passages were judged."""
    collections = await sync_to_async(_allowed)(user, list(collection_ids))
    if not collections or not question.strip():
        return Retrieved([])
    limit = settings.KNOWLEDGE_CANDIDATES
    words = await sync_to_async(lexical)([c.pk for c in collections], question, limit)
    meaning: list[tuple[int, float]] = []
    similarity: dict[int, float] = {}
    compared = False
    if hybrid:
        query, comparable = await _question_vector(user, question, collections)
        if query is not None:
            compared = True
            meaning = await sync_to_async(nearest)(comparable, query, limit)
            similarity = dict(meaning)
            meaning = [(pk, score) for pk, score in meaning if score >= settings.KNOWLEDGE_MIN_SIMILARITY]
    fused = fuse([pk for pk, _s in words], [pk for pk, _s in meaning])[: max(k, limit)]
    found = [replace(item, similarity=similarity.get(item.passage_id)) for item in await sync_to_async(_found)(fused)]
    profile = await sync_to_async(reranker)() if found else None
    if profile is not None:
        try:
            scores = await rerank(profile, str(user.pk), question, [item.text for item in found])
        except (LoadFailed, LlamaError, QueueUnavailable):
            return Retrieved(found[:k], compared)
        ranked = sorted(zip(scores, found, strict=True), key=lambda pair: -pair[0])
        kept = [replace(item, score=score) for score, item in ranked if score >= settings.KNOWLEDGE_MIN_RERANK_SCORE]
        return Retrieved(kept[:k], compared, reranked=True)
    return Retrieved(found[:k], compared)

"""A changed embedding model: collections whose vectors another model made (file or SHA256) are embedded
again in the background, on the documents worker, document by document with their progress shown as
while they were first indexed (Indexing, passages done).

From the start of a collection's run until its end its recorded model is cleared, so search leaves its
vectors out (it ranks vectors only of collections indexed by the current model) and its words keep
answering; at the end the current model is recorded and its vectors count again. One run per collection
at a time (a Redis lock that expires should its worker die; beat finds the collection stale again and a
new run starts it over)."""

from __future__ import annotations

import asyncio
import logging

from django.db.models import Q

from chat.knowledge.embedder import Embedder, embedder
from chat.knowledge.indexing import State, embed_passages, mark
from chat.knowledge.models import Collection, CollectionDocument, KnowledgePassage
from monitor.public import LlamaError, LoadFailed, QueueUnavailable, sync_redis

log = logging.getLogger(__name__)
LOCK_S = 3600


def lock_key(collection_id: int) -> str:
    return f"qwenweb:knowledge:reembed:{collection_id}"


def stale_collections(model: Embedder) -> list[int]:
    """Collections with vectors of another model than ``model`` (or left cleared by a run that died). Vectors
    of the same file whose SHA256 was not known yet when they were made are the same model's: kept."""
    same_model = Q(embed_model_file=model.model_file) & (Q(embed_model_sha256=model.sha256) | Q(embed_model_sha256=""))
    return list(Collection.objects.filter(~same_model, embed_dimensions__gt=0).values_list("pk", flat=True))


def collections_to_reembed() -> list[int]:
    """Stale collections no run has yet (beat queues each of them)."""
    model = embedder()
    if model is None or not model.sha256:
        return []
    redis = sync_redis()
    return [pk for pk in stale_collections(model) if not redis.exists(lock_key(pk))]


def reembed_collection(collection_id: int) -> str:
    """Embed one collection's passages again with the current model: "done", "current" (nothing to do),
    "busy" (another run has it), "failed" or "no model"."""
    model = embedder()
    if model is None or not model.sha256:
        return "no model"
    if collection_id not in stale_collections(model):
        return "current"
    redis = sync_redis()
    if not redis.set(lock_key(collection_id), "1", nx=True, ex=LOCK_S):
        return "busy"
    try:
        return _run(collection_id, model)
    finally:
        redis.delete(lock_key(collection_id))


def _run(collection_id: int, model: Embedder) -> str:
    Collection.objects.filter(pk=collection_id).update(embed_model_file="", embed_model_sha256="")
    entries = CollectionDocument.objects.filter(collection_id=collection_id, state=State.INDEXED)
    for entry in entries.select_related("document").order_by("pk"):
        passages = list(KnowledgePassage.objects.filter(document_id=entry.document_id).order_by("index"))
        mark(entry.pk, State.INDEXING, passages_done=0)
        try:
            asyncio.run(embed_passages(entry, model, passages, record_model=False))
        except (LoadFailed, LlamaError, QueueUnavailable) as error:
            log.warning("collection %s: embedding again failed: %s", collection_id, error)
            mark(entry.pk, State.INDEXED, entry.error, passages_done=entry.passages_done)
            return "failed"  # its vectors stay unused; beat finds it stale and tries again
        mark(entry.pk, State.INDEXED, passages_done=len(passages))  # its vectors made: no "words only" note
    Collection.objects.filter(pk=collection_id).update(
        embed_model_file=model.model_file, embed_model_sha256=model.sha256
    )
    return "done"

"""A collection's document in the documents worker: read by the documents' pipeline (``ingest``: OCR
and all), cut into passages with their page, their words into FTS5, then embedded through the
embeddings profile's fair queue as background work (people first). A document that fails to read or to
index is marked so in its collection, with the reason; the others go on."""

from __future__ import annotations

import asyncio
import logging

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import transaction
from django.utils.translation import gettext as _

from chat.documents.ingest import ingest
from chat.documents.selectors import text_pages
from chat.knowledge.embedder import Embedder, embed, embedder
from chat.knowledge.models import Collection, CollectionDocument, KnowledgePassage, KnowledgeVector
from chat.knowledge.passages import cut_pages
from chat.knowledge.vectors import add_terms, pack
from chat.models import Document
from monitor.public import LlamaError, LoadFailed, QueueUnavailable, close_loop_clients, serving_pool

log = logging.getLogger(__name__)
State = CollectionDocument.State
EMBED_TRIES = 3
EMBED_RETRY_S = 5.0


def mark(entry_id: int, state: str, error: str = "", **fields) -> None:
    CollectionDocument.objects.filter(pk=entry_id).update(state=state, error=error, **fields)


def index_document(document_id) -> str:
    """The whole run for one document; its entry's final state."""
    entry = CollectionDocument.objects.select_related("document", "collection").filter(document_id=document_id).first()
    if entry is None:
        return "gone"
    document = entry.document
    if document.status in (Document.Status.QUEUED, Document.Status.EXTRACTING):
        if not ingest(document.id):
            document.refresh_from_db()
            mark(entry.pk, State.FAILED, document.error or _("The document could not be read."))
            return State.FAILED
        # A collection's document has no summary: read, it is ready (the stalled-runs sweep leaves it be).
        Document.objects.filter(pk=document.id).update(status=Document.Status.READY)
    elif document.status == Document.Status.SUMMARIZING:  # read, then the run died before it said so
        Document.objects.filter(pk=document.id).update(status=Document.Status.READY)
    elif document.status != Document.Status.READY:
        mark(entry.pk, State.FAILED, document.error or _("The document could not be read."))
        return State.FAILED
    cuts = cut_pages(text_pages(document.id), settings.KNOWLEDGE_PASSAGE_TOKENS, settings.KNOWLEDGE_PASSAGE_OVERLAP)
    with transaction.atomic():
        KnowledgePassage.objects.filter(document=document).delete()
        passages = KnowledgePassage.objects.bulk_create(
            KnowledgePassage(collection=entry.collection, document=document, index=i, page=cut.page, text=cut.text)
            for i, cut in enumerate(cuts)
        )
        add_terms([(passage.pk, passage.text) for passage in passages])
    mark(entry.pk, State.INDEXING, passage_count=len(passages), passages_done=0)
    model = embedder()
    if model is None:
        mark(entry.pk, State.INDEXED, _("No embeddings profile: found by its words only."), passages_done=0)
        return State.INDEXED
    try:
        asyncio.run(embed_passages(entry, model, passages))
    except (LoadFailed, LlamaError, QueueUnavailable) as error:
        log.warning("document %s: embedding failed: %s", document.id, error)
        reason = _("Its passages could not be embedded (found by their words only): %(reason)s") % {"reason": error}
        mark(entry.pk, State.FAILED, reason)
        return State.FAILED
    mark(entry.pk, State.INDEXED, passages_done=len(passages))
    return State.INDEXED


async def embed_passages(
    entry: CollectionDocument, model: Embedder, passages: list[KnowledgePassage], *, record_model: bool = True
) -> None:
    """The passages' vectors (replacing any they had), batch by batch as background work; with
    ``record_model`` the collection records the model after each batch (a run embedding a collection
    again records it only at its end: ``reembedding``)."""
    try:
        owner = f"owner:{entry.document.owner_id}"
        batch = settings.KNOWLEDGE_EMBED_BATCH
        for start in range(0, len(passages), batch):
            part = passages[start : start + batch]
            vectors = await _embed_batch(model, owner, [passage.text for passage in part])
            await _store(entry, model, part, vectors, start + len(part), record_model)
    finally:
        await close_loop_clients()


async def _embed_batch(model: Embedder, owner: str, texts: list[str]) -> list[list[float]]:
    """One batch's vectors. The pool each batch: a profile unloaded meanwhile is brought up again, not
    waited for. A model server that does not answer (its instance being loaded again or restarted after
    a crash) is asked again EMBED_RETRY_S later, EMBED_TRIES times in all, before the document fails."""
    tries = 1
    while True:
        try:
            pool = await serving_pool(model.profile)
            return await embed(pool, owner, texts, "background")
        except LlamaError as error:
            if tries == EMBED_TRIES:
                raise
            tries += 1
            log.info("embedding asked again in %s s: %s", EMBED_RETRY_S, error)
            await asyncio.sleep(EMBED_RETRY_S)


def _store_sync(entry, model: Embedder, part, vectors, done: int, record_model: bool) -> None:
    with transaction.atomic():
        alive = set(KnowledgePassage.objects.filter(pk__in=[p.pk for p in part]).values_list("pk", flat=True))
        KnowledgeVector.objects.filter(passage_id__in=alive).delete()
        KnowledgeVector.objects.bulk_create(
            [
                KnowledgeVector(passage_id=p.pk, vector=pack(v))
                for p, v in zip(part, vectors, strict=True)
                if p.pk in alive
            ]
        )
        recorded = {"embed_model_file": model.model_file, "embed_model_sha256": model.sha256} if record_model else {}
        Collection.objects.filter(pk=entry.collection_id).update(embed_dimensions=len(vectors[0]), **recorded)
        CollectionDocument.objects.filter(pk=entry.pk).update(passages_done=done)


async def _store(entry, model, part, vectors, done, record_model) -> None:
    await sync_to_async(_store_sync)(entry, model, part, vectors, done, record_model)

"""Knowledge bases in tests: a collection filled through the product's services, its documents read and
indexed by the real documents worker, and the rows each table holds."""

from __future__ import annotations

import asyncio
import time

from django.db import connection

from chat.knowledge import search as knowledge_search
from chat.knowledge.models import Collection, CollectionDocument, KnowledgePassage, KnowledgeVector
from chat.knowledge.services import add_document, create_collection
from chat.tasks import queue_indexing

DONE = (CollectionDocument.State.INDEXED, CollectionDocument.State.FAILED)


def filled_collection(user, slug: str, files: dict[str, bytes], timeout_s: float = 600) -> Collection:
    """A new collection of ``files`` (name -> content), each read and indexed by the documents worker."""
    collection = create_collection(user, slug.title(), slug)
    add_files(user, collection, files, timeout_s)
    return collection


def add_files(user, collection: Collection, files: dict[str, bytes], timeout_s: float = 600) -> None:
    ids = [add_document(user, collection.pk, name, data).id for name, data in files.items()]
    for document_id in ids:
        queue_indexing(document_id)
    deadline = time.monotonic() + timeout_s
    while CollectionDocument.objects.filter(document_id__in=ids).exclude(state__in=DONE).exists():
        assert time.monotonic() < deadline, list(CollectionDocument.objects.values_list("state", "error"))
        time.sleep(0.3)


def fts_rows() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM chat_knowledge_fts")
        return cursor.fetchone()[0]


def row_counts(**where) -> dict[str, int]:
    """Passages, vectors and FTS rows (all of them: an orphan anywhere shows)."""
    return {
        "passages": KnowledgePassage.objects.filter(**where).count(),
        "vectors": KnowledgeVector.objects.filter(**{f"passage__{k}": v for k, v in where.items()}).count(),
        "fts": fts_rows(),
    }


def ask(user, collections: list[Collection], question: str, k: int = 5, hybrid: bool = True):
    return asyncio.run(knowledge_search.search(user, [c.pk for c in collections], question, k, hybrid=hybrid))


def documents_found(found) -> list[str]:
    return [item.document for item in found]

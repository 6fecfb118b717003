"""Knowledge bases in tests: a collection filled through the product's services, its documents read and
indexed by the real documents worker, and the rows each table holds."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator

from django.db import connection

from chat.knowledge import search as knowledge_search
from chat.knowledge.models import Collection, CollectionDocument, KnowledgePassage, KnowledgeVector
from chat.knowledge.services import add_document, create_collection, delete_collection
from chat.knowledge.vectors import add_terms
from chat.models import Document, DocumentPage
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


def own_document(owner, name: str, text: str) -> Document:
    """A ready document of ``owner``'s own (no collection's) whose one page is ``text``."""
    document = Document.objects.create(owner=owner, name=name, kind="txt", status=Document.Status.READY)
    DocumentPage.objects.create(document=document, number=1, text=text)
    return document


def words_collection(owner, slug: str, text: str, **fields) -> Collection:
    """A collection of ``owner`` with one document whose one passage is ``text``, indexed for its words
    only (no vectors, so no embeddings model is asked)."""
    collection = Collection.objects.create(owner=owner, name=slug, slug=slug, **fields)
    document = Document.objects.create(owner=owner, name=f"{slug}.txt", kind="txt", status=Document.Status.READY)
    CollectionDocument.objects.create(collection=collection, document=document, state="indexed")
    passage = KnowledgePassage.objects.create(collection=collection, document=document, index=0, page=1, text=text)
    add_terms([(passage.pk, passage.text)])
    return collection


@contextlib.contextmanager
def words_collections() -> Iterator[Callable[..., Collection]]:
    """``words_collection`` for a block: what it made is deleted at the end through the product's own
    service (documents, passages and their words), so a later test that counts every row of the database
    (``row_counts``: passages, vectors and words alike) finds none of these vectorless passages."""
    made: list[Collection] = []

    def make(owner, slug: str, text: str, **fields) -> Collection:
        made.append(words_collection(owner, slug, text, **fields))
        return made[-1]

    try:
        yield make
    finally:
        for collection in made:
            delete_collection(collection.owner, collection.pk)

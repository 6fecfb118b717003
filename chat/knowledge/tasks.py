"""The knowledge collections' Celery tasks (names pinned as ``chat.tasks.<function>``, see chat.tasks)."""

from celery import shared_task
from django.conf import settings

from chat.knowledge import indexing, reembedding


@shared_task(name="chat.tasks.index_collection_document", acks_late=True)
def index_collection_document(document_id: str) -> str:
    """A collection's document: read, cut into passages, embedded (background work in the fair queue)."""
    return indexing.index_document(document_id)


@shared_task(name="chat.tasks.reembed_stale_collections")
def reembed_stale_collections() -> list[int]:
    """Collections whose vectors another embedding model made, queued to be embedded again."""
    stale = reembedding.collections_to_reembed()
    for collection_id in stale:
        reembed_collection.apply_async((collection_id,), queue=settings.DOCUMENTS_QUEUE)
    return stale


@shared_task(name="chat.tasks.reembed_collection", acks_late=True)
def reembed_collection(collection_id: int) -> str:
    """One collection's passages embedded again by the current model (chat.knowledge.reembedding)."""
    return reembedding.reembed_collection(collection_id)


def queue_indexing(document_id) -> None:
    """On the documents worker's queue, like the documents' other work."""
    index_collection_document.apply_async((str(document_id),), queue=settings.DOCUMENTS_QUEUE)

"""Celery tasks of chat: thin, each calls a service. Names are pinned: the beat schedule and queued
messages refer to them as ``chat.tasks.<function>``."""

from celery import shared_task
from django.conf import settings

from chat.accounts.directory_check import recheck_directory as recheck_directory_people
from chat.accounts.oidc_check import recheck_oidc as recheck_oidc_people
from chat.conversations.services import mark_orphaned_streams
from chat.documents import heartbeats, pipeline
from chat.knowledge import indexing, reembedding
from chat.knowledge.selectors import in_a_collection
from chat.models import Document
from chat.usage import services as usage


@shared_task(name="chat.tasks.sweep_orphaned_streams")
def sweep_orphaned_streams(older_than_s: float | None = None) -> int:
    """Mark answers orphaned by a crashed web process as incomplete (their text is kept)."""
    if older_than_s is None:
        older_than_s = settings.CHAT_ORPHAN_AFTER_S
    return mark_orphaned_streams(older_than_s)


@shared_task(name="chat.tasks.prune_usage_ledger")
def prune_usage_ledger() -> int:
    """Delete the usage ledger's rows older than QWENWEB_USAGE_RETENTION_DAYS, in batches."""
    return usage.delete_older_than(settings.USAGE_RETENTION_DAYS)


@shared_task(name="chat.tasks.ingest_document", acks_late=True)
def ingest_document(document_id: str) -> str:
    """Extract the pages, then summarize the whole document in the same run."""
    return pipeline.ingest_and_summarize(document_id)


@shared_task(name="chat.tasks.summarize_document", acks_late=True)
def summarize_document(document_id: str) -> str:
    return pipeline.run_summary(document_id)


@shared_task(name="chat.tasks.resume_stalled_documents")
def resume_stalled_documents(older_than_s: float | None = None) -> list[str]:
    """Run again documents whose worker died; summaries continue from the chunks already done."""
    if older_than_s is None:
        older_than_s = settings.DOCUMENT_STALL_S
    stalled = heartbeats.stalled_documents(older_than_s)
    for document_id in stalled:
        status = heartbeats.claim_stalled(document_id)
        if status and in_a_collection(document_id):  # a collection's: read again and indexed, not summarized
            queue_indexing(document_id)
        elif status == Document.Status.EXTRACTING:
            ingest_document.delay(document_id)
        elif status == Document.Status.SUMMARIZING:
            summarize_document.delay(document_id)
    return stalled


@shared_task(name="chat.tasks.recheck_directory")
def recheck_directory() -> dict:
    """People gone or disabled in the LDAP directory disabled here (their API keys with them)."""
    result = recheck_directory_people()
    return {"checked": result.checked, "disabled": result.disabled, "enabled": result.enabled, "failed": result.failed}


@shared_task(name="chat.tasks.recheck_oidc")
def recheck_oidc() -> dict:
    """People disabled or removed at the OIDC provider disabled here (their API keys with them)."""
    result = recheck_oidc_people()
    return {
        "checked": result.checked,
        "unchecked": result.unchecked,
        "disabled": result.disabled,
        "enabled": result.enabled,
        "failed": result.failed,
    }


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

"""Celery tasks of chat: thin, each calls a service. Names are pinned: the beat schedule and queued
messages refer to them as ``chat.tasks.<function>``. The features' own tasks live beside them
(``chat.knowledge.tasks``, ``chat.accounts.directory_tasks``, ``chat.usage.tasks``), imported here so
that the workers, which find this module, register them."""

from celery import shared_task
from django.conf import settings

from chat.accounts import directory_tasks  # noqa: F401  (registers its tasks)
from chat.conversations.services import mark_orphaned_streams
from chat.documents import heartbeats, pipeline
from chat.knowledge.selectors import in_a_collection
from chat.knowledge.tasks import queue_indexing
from chat.models import Document
from chat.usage import tasks as usage_tasks  # noqa: F401  (registers its tasks)


@shared_task(name="chat.tasks.sweep_orphaned_streams")
def sweep_orphaned_streams(older_than_s: float | None = None) -> int:
    """Mark answers orphaned by a crashed web process as incomplete (their text is kept)."""
    return mark_orphaned_streams(settings.CHAT_ORPHAN_AFTER_S if older_than_s is None else older_than_s)


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
    stalled = heartbeats.stalled_documents(settings.DOCUMENT_STALL_S if older_than_s is None else older_than_s)
    for document_id in stalled:
        status = heartbeats.claim_stalled(document_id)
        if status and in_a_collection(document_id):  # a collection's: read again and indexed, not summarized
            queue_indexing(document_id)
        elif status == Document.Status.EXTRACTING:
            ingest_document.delay(document_id)
        elif status == Document.Status.SUMMARIZING:
            summarize_document.delay(document_id)
    return stalled

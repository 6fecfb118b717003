from celery import shared_task
from django.conf import settings

from chat.services.conversations import mark_orphaned_streams


@shared_task
def sweep_orphaned_streams(older_than_s: float | None = None) -> int:
    """Mark answers orphaned by a crashed web process as incomplete (their text is kept)."""
    if older_than_s is None:
        older_than_s = settings.CHAT_ORPHAN_AFTER_S
    return mark_orphaned_streams(older_than_s)


@shared_task(acks_late=True)
def ingest_document(document_id: str) -> str:
    """Extract the pages, then summarize the whole document in the same run."""
    from chat.services import summaries

    return summaries.ingest_and_summarize(document_id)


@shared_task(acks_late=True)
def summarize_document(document_id: str) -> str:
    from chat.services import summaries

    return summaries.run_summary(document_id)


@shared_task
def resume_stalled_documents(older_than_s: float | None = None) -> list[str]:
    """Run again documents whose worker died; summaries continue from the chunks already done."""
    from chat.models import Document
    from chat.services import documents

    if older_than_s is None:
        older_than_s = settings.DOCUMENT_STALL_S
    stalled = documents.stalled_documents(older_than_s)
    for document_id in stalled:
        status = documents.claim_stalled(document_id)
        if status == Document.Status.EXTRACTING:
            ingest_document.delay(document_id)
        elif status == Document.Status.SUMMARIZING:
            summarize_document.delay(document_id)
    return stalled

"""Writes to documents: what a person does to one (cancel it, summarize it again), and what the
worker's steps record (a reading that failed; a summary's plan, each part's outcome, the summary's
end). Reads are in ``selectors``; a run's heartbeat and claim in ``heartbeats``."""

from __future__ import annotations

from dataclasses import asdict

from django.db import transaction
from django.db.models import F
from django.utils import timezone
from django.utils.translation import gettext as _

from chat.documents.languages import clean_language
from chat.documents.selectors import get_document, summary_chunks
from chat.documents.summary_plan import Piece
from chat.documents.uploads import stored_file
from chat.errors import DocumentError
from chat.models import Document, DocumentChunk, DocumentPage

# ---------------------------------------------------------------- the person's actions


def request_cancel(user, document_id) -> Document:
    document = get_document(user, document_id)
    if document.status in Document.ACTIVE:
        Document.objects.filter(id=document.id).update(cancel_requested=True)
        if document.status == Document.Status.QUEUED:
            Document.objects.filter(id=document.id).update(status=Document.Status.CANCELLED)
            stored_file(document).unlink(missing_ok=True)
    document.refresh_from_db()
    return document


def restart_summary(user, document_id, language: str | None = None) -> Document:
    """Summarize again: resumes from the parts done, or starts over in another language."""
    document = get_document(user, document_id)
    if document.status in Document.ACTIVE:
        raise DocumentError(_("This document is still being processed."))
    if not DocumentPage.objects.filter(document=document).exclude(text="").exists():
        raise DocumentError(_("This document has no text to summarize."))
    with transaction.atomic():
        language = document.summary_language if language is None else clean_language(language)
        # A finished summary is made anew; a failed or cancelled one continues from its chunks.
        if document.status == Document.Status.READY or language != document.summary_language:
            DocumentChunk.objects.filter(document=document).delete()
            document.summary = ""
        document.summary_language = language
        document.status = Document.Status.SUMMARIZING
        document.error = ""
        document.cancel_requested = False
        document.heartbeat_at = None
        document.attempts = 0  # the person's own try: it gets every run again
        document.save()
    return document


# ---------------------------------------------------------------- the worker's steps


def fail_reading(document_id, message: str) -> None:
    """Reading the document failed: it leaves no half-ingested pages or chunks behind."""
    with transaction.atomic():
        DocumentChunk.objects.filter(document_id=document_id).delete()
        DocumentPage.objects.filter(document_id=document_id).delete()
        Document.objects.filter(id=document_id).update(
            status=Document.Status.FAILED, error=message, pages_done=0, heartbeat_at=None, updated_at=timezone.now()
        )


@transaction.atomic
def save_summary_plan(document_id, level: int, chunks: list[Piece]) -> list[DocumentChunk]:
    if DocumentChunk.objects.filter(document_id=document_id, level=level).exists():
        return summary_chunks(document_id, level)  # another run planned it first
    DocumentChunk.objects.bulk_create(
        DocumentChunk(document_id=document_id, level=level, index=index, **asdict(chunk))
        for index, chunk in enumerate(chunks)
    )
    return summary_chunks(document_id, level)


def mark_chunk_started(chunk_id: int) -> None:
    DocumentChunk.objects.filter(id=chunk_id).update(requests=F("requests") + 1)


def mark_chunk_done(chunk_id: int, summary: str, note: str) -> None:
    DocumentChunk.objects.filter(id=chunk_id).update(summary=summary, note=note, done=True, finished_at=timezone.now())


def finish_summary(document_id, summary: str) -> None:
    Document.objects.filter(id=document_id).update(
        status=Document.Status.READY, summary=summary, error="", heartbeat_at=None, updated_at=timezone.now()
    )


def stop_summary(document_id, status: str, error: str = "") -> None:
    """Cancelled or failed: the chunks done so far are kept for the next try."""
    Document.objects.filter(id=document_id).update(
        status=status, error=error, cancel_requested=False, heartbeat_at=None, updated_at=timezone.now()
    )

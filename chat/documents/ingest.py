"""The worker's side of a document: extract and store its pages, report progress, cancel,
and find runs whose worker died."""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from chat.documents.sandbox import Cancelled, extract_in_child
from chat.documents.scan_reading import model_reader, read_scans
from chat.documents.selectors import get_document, page_list
from chat.documents.uploads import stored_file
from chat.errors import DocumentError
from chat.models import Document, DocumentChunk, DocumentPage

log = logging.getLogger(__name__)


HEARTBEAT_S = 2.0  # how often a run records that it is alive (CLAIM_AFTER_S is three of these)


def still_wanted(document_id) -> bool:
    """False when the user asked to cancel or deleted the document (a read: asked often)."""
    return Document.objects.filter(id=document_id, cancel_requested=False).exists()


def heartbeat(document_id, **fields) -> bool:
    """Record progress; False when the user asked to cancel or deleted the document."""
    Document.objects.filter(id=document_id).update(heartbeat_at=timezone.now(), updated_at=timezone.now(), **fields)
    return still_wanted(document_id)


class Pulse:
    """A run's check, asked every half second: a heartbeat write every HEARTBEAT_S, the cancel read each time."""

    def __init__(self, document_id):
        self.document_id = document_id
        self.last_beat = 0.0

    def __call__(self, **fields) -> bool:
        now = time.monotonic()
        if now - self.last_beat >= HEARTBEAT_S:
            self.last_beat = now
            return heartbeat(self.document_id, **fields)
        return still_wanted(self.document_id)


def fail(document_id, message: str) -> None:
    """A failure leaves no half-ingested pages or chunks behind."""
    with transaction.atomic():
        DocumentChunk.objects.filter(document_id=document_id).delete()
        DocumentPage.objects.filter(document_id=document_id).delete()
        Document.objects.filter(id=document_id).update(
            status=Document.Status.FAILED, error=message, pages_done=0, heartbeat_at=None, updated_at=timezone.now()
        )


PAGE_BATCH = 50


def ingest(document_id) -> bool:
    """Extract and store every page; True when the document is ready to summarize."""
    document = Document.objects.get(id=document_id)
    if document.status not in (Document.Status.QUEUED, Document.Status.EXTRACTING):
        return False
    if not claim(document.id):
        log.info("document %s: another run is reading it", document.id)
        return False
    path = stored_file(document)
    # Extraction is fast: a run that died half-way starts the pages again.
    DocumentPage.objects.filter(document=document).delete()
    heartbeat(document.id, status=Document.Status.EXTRACTING, pages_done=0, error="", scan_note="")
    # The model reads the scans where the profile's admin chose so; else Tesseract, in the child.
    reader, scan_note = model_reader(document)
    scanned: list[int] = []
    read_by_ocr: list[int] = []
    read_by_model: list[int] = []
    batch: list[DocumentPage] = []
    scans: list[tuple[int, Path]] = []  # rendered for the model, read after the text layers
    done = [0]  # pages stored so far, reported with each heartbeat
    scan_dir = Path(tempfile.mkdtemp(prefix="qwenweb-scans-"))
    try:
        if not path.exists():
            raise DocumentError(_("The uploaded file is gone; upload it again."))
        pulse = Pulse(document.id)
        edge = settings.DOCUMENT_VISION_MAX_EDGE if reader else 0
        for page in extract_in_child(path, document.kind, lambda: pulse(pages_done=done[0]), edge):
            if page.scanned:
                scanned.append(page.number)
            if page.ocr:
                read_by_ocr.append(page.number)
            if page.image:
                scans.append((page.number, scan_dir / f"{page.number}.png"))
                scans[-1][1].write_bytes(page.image)
                continue
            batch.append(DocumentPage(document=document, number=page.number, text=page.text))
            if len(batch) >= PAGE_BATCH or page.ocr:  # an OCR page takes seconds: its progress shows at once
                DocumentPage.objects.bulk_create(batch)
                batch = []
                done[0] = page.number
        DocumentPage.objects.bulk_create(batch)
        if scans:
            reading = read_scans(reader, document.owner_id, scans, _page_store(document), pulse)
            read_by_model, scan_note = reading.by_model, reading.note
            read_by_ocr = sorted(read_by_ocr + reading.by_ocr)
    except Cancelled:
        DocumentPage.objects.filter(document=document).delete()
        Document.objects.filter(id=document.id).update(status=Document.Status.CANCELLED, pages_done=0)
        path.unlink(missing_ok=True)
        return False
    except DocumentError as error:
        fail(document.id, str(error))
        path.unlink(missing_ok=True)
        return False
    except Exception:
        log.exception("document %s: extraction failed", document.id)
        fail(document.id, _("This file could not be read: it may be damaged."))
        path.unlink(missing_ok=True)
        return False
    finally:
        shutil.rmtree(scan_dir, ignore_errors=True)
    total = DocumentPage.objects.filter(document=document).count()
    read = {"scanned_pages": scanned, "ocr_pages": read_by_ocr, "model_read_pages": read_by_model}
    if not DocumentPage.objects.filter(document=document).exclude(text="").exists():
        fail(document.id, no_text_message(scanned, read_by_ocr + read_by_model))
        Document.objects.filter(id=document.id).update(scan_note=scan_note, **read)
        path.unlink(missing_ok=True)
        return False
    heartbeat(
        document.id, status=Document.Status.SUMMARIZING, pages_done=total, page_count=total, scan_note=scan_note, **read
    )
    path.unlink(missing_ok=True)
    return True


def _page_store(document: Document):
    """Stores a scan's text as the model (or Tesseract) reads it, its progress shown at once."""
    stored = [DocumentPage.objects.filter(document=document).count()]

    def store(number: int, text: str) -> bool:
        DocumentPage.objects.create(document=document, number=number, text=text)
        stored[0] += 1
        return heartbeat(document.id, pages_done=stored[0])

    return store


def no_text_message(scanned: list[int], read_by_ocr: list[int]) -> str:
    if read_by_ocr:
        return ngettext(
            "No page of this document has a text layer, and text recognition (OCR) found no text on page %(pages)s.",
            "No page of this document has a text layer, and text recognition (OCR) found no text on pages %(pages)s.",
            len(read_by_ocr),
        ) % {"pages": page_list(read_by_ocr)}
    if scanned:
        return ngettext(
            "No page of this document has a text layer (page %(pages)s is a scanned image); text recognition (OCR) is not available.",
            "No page of this document has a text layer (pages %(pages)s are scanned images); text recognition (OCR) is not available.",
            len(scanned),
        ) % {"pages": page_list(scanned)}
    return _("This document contains no text.")


def request_cancel(user, document_id) -> Document:
    document = get_document(user, document_id)
    if document.status in Document.ACTIVE:
        Document.objects.filter(id=document.id).update(cancel_requested=True)
        if document.status == Document.Status.QUEUED:
            Document.objects.filter(id=document.id).update(status=Document.Status.CANCELLED)
            stored_file(document).unlink(missing_ok=True)
    document.refresh_from_db()
    return document


def stalled_documents(older_than_s: float) -> list[str]:
    """Documents whose worker stopped reporting (killed): they are to be run again."""
    cutoff = timezone.now() - timedelta(seconds=older_than_s)
    return [
        str(pk)
        for pk in Document.objects.filter(
            status__in=[Document.Status.EXTRACTING, Document.Status.SUMMARIZING], heartbeat_at__lt=cutoff
        ).values_list("id", flat=True)
    ]


def claim_stalled(document_id) -> str:
    """Clear a stalled document's heartbeat (so it is queued once, and its next run may claim it);
    say which step to run again, or "" when it has had its runs and is failed instead."""
    document = Document.objects.filter(id=document_id).first()
    if document is None:
        return ""
    if document.attempts >= settings.DOCUMENT_MAX_ATTEMPTS:
        message = ngettext(
            "Reading this document stopped %(count)d time before it finished, so it was given up.",
            "Reading this document stopped %(count)d times before it finished, so it was given up.",
            document.attempts,
        ) % {"count": document.attempts}
        if document.status == Document.Status.EXTRACTING:
            fail(document.id, message)
            stored_file(document).unlink(missing_ok=True)
        else:  # the summary's finished parts are kept: trying again continues from them
            Document.objects.filter(id=document.id).update(
                status=Document.Status.FAILED, error=message, heartbeat_at=None, updated_at=timezone.now()
            )
        return ""
    Document.objects.filter(id=document_id).update(heartbeat_at=None)
    return document.status


CLAIM_AFTER_S = 6.0  # three missed heartbeats


def claim(document_id) -> bool:
    """Take the document for this run; False while another live run holds it (its heartbeat is fresh)."""
    cutoff = timezone.now() - timedelta(seconds=CLAIM_AFTER_S)
    fresh = Q(heartbeat_at__isnull=True) | Q(heartbeat_at__lt=cutoff)
    return bool(
        Document.objects.filter(fresh, id=document_id).update(heartbeat_at=timezone.now(), attempts=F("attempts") + 1)
    )

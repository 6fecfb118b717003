"""Reading a document into the database: its file's pages extracted in a limited child
(``sandbox``), scans read by the model or by OCR (``scan_reading``), each page stored as it comes,
the progress shown with each heartbeat (``heartbeats``)."""

from __future__ import annotations

import logging
import shutil
import tempfile
from pathlib import Path

from django.conf import settings
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from chat.documents.heartbeats import HeartbeatAndCancelCheck, claim, heartbeat
from chat.documents.sandbox import Cancelled, extract_in_child
from chat.documents.scan_reading import model_reader, read_scans
from chat.documents.selectors import page_list
from chat.documents.services import fail_reading
from chat.documents.uploads import stored_file
from chat.errors import DocumentError
from chat.models import Document, DocumentPage

log = logging.getLogger(__name__)

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
        alive = HeartbeatAndCancelCheck(document.id)
        edge = settings.DOCUMENT_VISION_MAX_EDGE if reader else 0
        for page in extract_in_child(path, document.kind, lambda: alive(pages_done=done[0]), edge):
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
            reading = read_scans(reader, document.owner_id, scans, _page_store(document), alive)
            read_by_model, scan_note = reading.by_model, reading.note
            read_by_ocr = sorted(read_by_ocr + reading.by_ocr)
    except Cancelled:
        DocumentPage.objects.filter(document=document).delete()
        Document.objects.filter(id=document.id).update(status=Document.Status.CANCELLED, pages_done=0)
        path.unlink(missing_ok=True)
        return False
    except DocumentError as error:
        fail_reading(document.id, str(error))
        path.unlink(missing_ok=True)
        return False
    except Exception:
        log.exception("document %s: extraction failed", document.id)
        fail_reading(document.id, _("This file could not be read: it may be damaged."))
        path.unlink(missing_ok=True)
        return False
    finally:
        shutil.rmtree(scan_dir, ignore_errors=True)
    total = DocumentPage.objects.filter(document=document).count()
    read = {"scanned_pages": scanned, "ocr_pages": read_by_ocr, "model_read_pages": read_by_model}
    if not DocumentPage.objects.filter(document=document).exclude(text="").exists():
        fail_reading(document.id, no_text_message(scanned, read_by_ocr + read_by_model))
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

"""Documents: check an upload at the border, extract its text page by page, store the pages.

PDF text comes from PDFium (pypdfium2): fast, reads CID/CJK fonts through their
ToUnicode maps, and opens encrypted files given the password. The password is
used once, in memory, to write a copy without the encryption; it is stored nowhere.
TXT and Markdown have no pages: they are cut into page-sized blocks at line breaks
so citations still point somewhere.
"""

from __future__ import annotations

import io
import logging
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from chat.errors import ChatError, NotFound
from chat.models import Conversation, Document, DocumentChunk, DocumentPage

log = logging.getLogger(__name__)

EXTENSIONS = {".pdf": Document.Kind.PDF, ".txt": Document.Kind.TEXT, ".md": Document.Kind.MARKDOWN}
EXTENSIONS[".markdown"] = Document.Kind.MARKDOWN
TEXT_PAGE_CHARS = 3000  # a "page" of a TXT/Markdown file
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\ufffe\uffff]")


class DocumentError(ChatError):
    """A document refused or failed; the message names the reason."""


class PasswordNeeded(DocumentError):
    """The PDF is encrypted and the password was missing or wrong."""


@dataclass(frozen=True)
class PageText:
    number: int  # 1-based
    text: str
    scanned: bool = False  # no text layer, but images: a scan


# ---------------------------------------------------------------- the border


def document_kind(name: str) -> str:
    kind = EXTENSIONS.get(Path(name).suffix.lower())
    if kind is None:
        raise DocumentError(_("Only PDF, TXT and Markdown (.md) files can be read."))
    return kind


def _open_pdf(data: bytes, password: str | None) -> pdfium.PdfDocument:
    try:
        return pdfium.PdfDocument(data, password=password or None)
    except pdfium.PdfiumError as error:
        if getattr(error, "err_code", None) == pdfium_c.FPDF_ERR_PASSWORD:
            if password:
                raise PasswordNeeded(_("The password is not right for this PDF. Try again.")) from error
            raise PasswordNeeded(_("This PDF is protected by a password. Enter it to read the file.")) from error
        raise DocumentError(_("This PDF is damaged and cannot be read.")) from error


def _decrypted_copy(pdf: pdfium.PdfDocument) -> bytes:
    buffer = io.BytesIO()
    pdf.save(buffer, flags=pdfium_c.FPDF_REMOVE_SECURITY)
    return buffer.getvalue()


def check_upload(name: str, data: bytes, password: str | None = None) -> tuple[str, int, bytes]:
    """(kind, pages, the bytes to keep) or DocumentError with the reason it is refused."""
    kind = document_kind(name)
    if len(data) > settings.DOCUMENT_MAX_BYTES:
        raise DocumentError(
            _("The file is too large: the limit is %(mb)d MB.") % {"mb": settings.DOCUMENT_MAX_BYTES // 1_048_576}
        )
    if not data:
        raise DocumentError(_("The file is empty."))
    if kind == Document.Kind.PDF:
        if b"%PDF-" not in data[:1024]:
            raise DocumentError(_("This file is not a PDF, whatever its name says."))
        pdf = _open_pdf(data, password)
        try:
            pages = len(pdf)
            if pages == 0:
                raise DocumentError(_("This PDF has no pages."))
            _check_page_limit(pages)
            if password:
                data = _decrypted_copy(pdf)
        finally:
            pdf.close()
        return kind, pages, data
    text = decode_text(data)
    pages = len(split_text_pages(text))
    _check_page_limit(pages)
    return kind, pages, data


def _check_page_limit(pages: int) -> None:
    if pages > settings.DOCUMENT_MAX_PAGES:
        raise DocumentError(
            _("The document has %(pages)d pages; the limit is %(limit)d.")
            % {"pages": pages, "limit": settings.DOCUMENT_MAX_PAGES}
        )


def decode_text(data: bytes) -> str:
    if data.startswith(b"%PDF-"):
        raise DocumentError(_("This file is a PDF, not a text file: rename it to .pdf."))
    if b"\x00" in data[:8192]:
        raise DocumentError(_("This file is not text, whatever its name says."))
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise DocumentError(_("This file is not UTF-8 text, whatever its name says.")) from error


# ---------------------------------------------------------------- extraction


def clean_text(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROL.sub("", text)
    return "\n".join(line.rstrip() for line in text.split("\n")).strip()


def split_text_pages(text: str) -> list[str]:
    """Cut plain text into blocks of about TEXT_PAGE_CHARS, at line breaks where there is one."""
    pages: list[str] = []
    current: list[str] = []
    size = 0
    for line in text.splitlines():
        while len(line) > TEXT_PAGE_CHARS:  # one huge line: cut it
            head, line = line[:TEXT_PAGE_CHARS], line[TEXT_PAGE_CHARS:]
            if current:
                pages.append("\n".join(current))
                current, size = [], 0
            pages.append(head)
        if size + len(line) > TEXT_PAGE_CHARS and current:
            pages.append("\n".join(current))
            current, size = [], 0
        current.append(line)
        size += len(line) + 1
    if current:
        pages.append("\n".join(current))
    return [clean_text(page) for page in pages] or [""]


def _column_gutter(rects: list[tuple[float, float, float, float]], width: float) -> float | None:
    """The x of a vertical gap that splits the text into two columns side by side, if any."""
    if len(rects) < 6 or width <= 0:
        return None
    spans = sorted((left, right) for left, _bottom, right, _top in rects)
    best: tuple[float, float] | None = None
    reach = spans[0][1]
    for left, right in spans[1:]:
        gap = left - reach
        middle = (left + reach) / 2
        if gap >= width * 0.015 and width * 0.25 <= middle <= width * 0.75 and (best is None or gap > best[0]):
            best = (gap, middle)
        reach = max(reach, right)
    if best is None:
        return None
    gutter = best[1]
    left_side = [r for r in rects if r[2] <= gutter]
    right_side = [r for r in rects if r[0] >= gutter]
    if len(left_side) < 3 or len(right_side) < 3:
        return None
    # Side by side: the two sides share most of their height (not a caption beside a figure).
    low = max(min(r[1] for r in left_side), min(r[1] for r in right_side))
    high = min(max(r[3] for r in left_side), max(r[3] for r in right_side))
    shortest = min(
        max(r[3] for r in left_side) - min(r[1] for r in left_side),
        max(r[3] for r in right_side) - min(r[1] for r in right_side),
    )
    return gutter if shortest > 0 and high - low >= 0.5 * shortest else None


def _pdf_page_text(page: pdfium.PdfPage) -> tuple[str, bool]:
    textpage = page.get_textpage()
    try:
        rect_count = textpage.count_rects()
        if rect_count == 0:
            return "", any(True for _obj in page.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_IMAGE], max_depth=2))
        width, height = page.get_size()
        gutter = _column_gutter([textpage.get_rect(i) for i in range(rect_count)], width)
        if gutter is None:
            return clean_text(textpage.get_text_range()), False
        left = textpage.get_text_bounded(0, 0, gutter, height)
        right = textpage.get_text_bounded(gutter, 0, width, height)
        return clean_text(left) + "\n\n" + clean_text(right), False
    finally:
        textpage.close()


def extract_pdf_pages(source: bytes | str | Path, password: str | None = None) -> Iterator[PageText]:
    """Every page's text in reading order; pages with images and no text are marked scanned."""
    if isinstance(source, Path):
        source = str(source)
    pdf = _open_pdf(source, password)
    try:
        for index in range(len(pdf)):
            page = pdf[index]
            try:
                text, scanned = _pdf_page_text(page)
            finally:
                page.close()
            yield PageText(index + 1, text, scanned)
    finally:
        pdf.close()


def extract_pages(path: Path, kind: str) -> Iterator[PageText]:
    if kind == Document.Kind.PDF:
        yield from extract_pdf_pages(path)
        return
    for number, text in enumerate(split_text_pages(decode_text(path.read_bytes())), start=1):
        yield PageText(number, text)


# ---------------------------------------------------------------- storage and the worker's side


def document_dir() -> Path:
    path = Path(settings.DOCUMENT_DIR)
    path.mkdir(parents=True, exist_ok=True)
    return path


def stored_file(document: Document) -> Path:
    return document_dir() / f"{document.id}.{document.kind}"


def create_document(
    user, conversation: Conversation | None, name: str, data: bytes, *, password: str | None = None, language: str = ""
) -> Document:
    """Check the upload and keep it for the worker; refused files leave nothing behind."""
    name = Path(name or "document").name[:255]
    kind, pages, data = check_upload(name, data, password)
    document = Document(
        id=uuid.uuid4(),
        owner=user,
        conversation=conversation,
        name=name,
        kind=kind,
        size_bytes=len(data),
        page_count=pages,
        summary_language=clean_language(language),
    )
    path = stored_file(document)
    temporary = path.with_suffix(".part")
    temporary.write_bytes(data)
    temporary.replace(path)
    try:
        document.save(force_insert=True)
    except Exception:
        path.unlink(missing_ok=True)
        raise
    return document


def clean_language(language: str) -> str:
    from chat.services.summaries import LANGUAGES

    language = (language or "").strip()
    if language and language not in LANGUAGES:
        raise DocumentError(_("Unknown summary language."))
    return language


def get_document(user, document_id) -> Document:
    try:
        return Document.objects.get(id=uuid.UUID(str(document_id)), owner=user)
    except (Document.DoesNotExist, ValueError) as error:
        raise NotFound(_("This document does not exist.")) from error


def heartbeat(document_id, **fields) -> bool:
    """Record progress; False when the user asked to cancel."""
    Document.objects.filter(id=document_id).update(heartbeat_at=timezone.now(), updated_at=timezone.now(), **fields)
    return not Document.objects.filter(id=document_id, cancel_requested=True).exists()


def fail(document_id, message: str) -> None:
    """A failure leaves no half-ingested pages or chunks behind."""
    with transaction.atomic():
        DocumentChunk.objects.filter(document_id=document_id).delete()
        DocumentPage.objects.filter(document_id=document_id).delete()
        Document.objects.filter(id=document_id).update(
            status=Document.Status.FAILED, error=message, pages_done=0, heartbeat_at=None, updated_at=timezone.now()
        )


class Cancelled(Exception):
    pass


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
    heartbeat(document.id, status=Document.Status.EXTRACTING, pages_done=0, error="")
    scanned: list[int] = []
    batch: list[DocumentPage] = []
    try:
        if not path.exists():
            raise DocumentError(_("The uploaded file is gone; upload it again."))
        for page in extract_pages(path, document.kind):
            if page.scanned:
                scanned.append(page.number)
            batch.append(DocumentPage(document=document, number=page.number, text=page.text))
            if len(batch) >= PAGE_BATCH:
                DocumentPage.objects.bulk_create(batch)
                batch = []
                if not heartbeat(document.id, pages_done=page.number):
                    raise Cancelled()
        DocumentPage.objects.bulk_create(batch)
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
    total = DocumentPage.objects.filter(document=document).count()
    if not DocumentPage.objects.filter(document=document).exclude(text="").exists():
        fail(document.id, no_text_message(scanned, total))
        Document.objects.filter(id=document.id).update(scanned_pages=scanned)
        path.unlink(missing_ok=True)
        return False
    heartbeat(
        document.id, status=Document.Status.SUMMARIZING, pages_done=total, page_count=total, scanned_pages=scanned
    )
    path.unlink(missing_ok=True)
    return True


def no_text_message(scanned: list[int], total: int) -> str:
    if scanned:
        return _(
            "No page of this document has a text layer (pages %(pages)s are scanned images); text recognition (OCR) is not available."
        ) % {"pages": page_list(scanned)}
    return _("This document contains no text.")


def page_list(numbers: list[int]) -> str:
    """1, 2, 3, 5 -> '1–3, 5'"""
    ranges: list[str] = []
    start = previous = None
    for number in sorted(numbers):
        if previous is not None and number == previous + 1:
            previous = number
            continue
        if start is not None:
            ranges.append(str(start) if start == previous else f"{start}–{previous}")
        start = previous = number
    if start is not None:
        ranges.append(str(start) if start == previous else f"{start}–{previous}")
    return ", ".join(ranges)


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
    say which step to run again."""
    Document.objects.filter(id=document_id).update(heartbeat_at=None)
    return Document.objects.filter(id=document_id).values_list("status", flat=True).first() or ""


CLAIM_AFTER_S = 6.0  # three missed heartbeats


def claim(document_id) -> bool:
    """Take the document for this run; False while another live run holds it (its heartbeat is fresh)."""
    from django.db.models import Q

    cutoff = timezone.now() - timedelta(seconds=CLAIM_AFTER_S)
    fresh = Q(heartbeat_at__isnull=True) | Q(heartbeat_at__lt=cutoff)
    return bool(Document.objects.filter(fresh, id=document_id).update(heartbeat_at=timezone.now()))


def document_payload(document: Document) -> dict:
    """What the page shows of a document while it is read and summarized."""
    from django.urls import reverse

    chunks = list(document.chunks.values("level", "index", "first_page", "last_page", "done", "requests"))
    levels = [c for c in chunks if c["level"] == 0]
    payload = {
        "id": str(document.id),
        "name": document.name,
        "kind": document.kind,
        "status": document.status,
        "status_label": str(Document.Status(document.status).label),
        "active": document.status in Document.ACTIVE,
        "error": document.error,
        "page_count": document.page_count,
        "pages_done": document.pages_done,
        "scanned_pages": document.scanned_pages,
        "scanned_note": "",
        "summary": document.summary,
        "summary_language": document.summary_language,
        "chunks_total": len(chunks),
        "chunks_done": sum(1 for c in chunks if c["done"]),
        "chunks": [
            {
                "level": c["level"],
                "pages": f"{c['first_page']}–{c['last_page']}"
                if c["first_page"] != c["last_page"]
                else str(c["first_page"]),
                "state": "done" if c["done"] else ("running" if c["requests"] else "waiting"),
            }
            for c in chunks
        ],
        "parts": len(levels),
        "urls": {
            "status": reverse("chat:document", args=[document.id]),
            "cancel": reverse("chat:document-cancel", args=[document.id]),
            "summarize": reverse("chat:document-summarize", args=[document.id]),
        },
    }
    if document.scanned_pages and document.status != Document.Status.FAILED:
        payload["scanned_note"] = _(
            "Pages %(pages)s have no text layer (scanned images) and were left out: text recognition (OCR) is not available."
        ) % {"pages": page_list(document.scanned_pages)}
    return payload


def conversation_documents(conversation: Conversation | None) -> list[dict]:
    if conversation is None:
        return []
    return [document_payload(d) for d in conversation.documents.order_by("created_at")]

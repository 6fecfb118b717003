"""Reads of documents: one of the user's own, what the page shows of each, and what a summary's run
reads of its pages and chunks."""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from chat.documents.citations import as_spans, span_text
from chat.errors import NotFound
from chat.models import Conversation, Document, DocumentChunk, DocumentPage
from monitor.public import ServerProfile


def get_document(user, document_id) -> Document:
    try:
        return Document.objects.get(id=uuid.UUID(str(document_id)), owner=user)
    except (Document.DoesNotExist, ValueError) as error:
        raise NotFound(_("This document does not exist.")) from error


def page_list(numbers: Iterable[int]) -> str:
    """1, 2, 3, 5 -> '1–3, 5'"""
    return span_text(as_spans(sorted(numbers)))


def document_payload(document: Document) -> dict:
    """What the page shows of a document while it is read and summarized."""
    chunks = list(document.chunks.values("level", "index", "first_page", "last_page", "done", "requests"))
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
        "ocr_pages": document.ocr_pages,
        "model_read_pages": document.model_read_pages,
        "scanned_note": "",
        "summary": document.summary,
        "summary_language": document.summary_language,
        "chunks_total": len(chunks),
        "chunks_done": sum(1 for c in chunks if c["done"]),
        "chunks": [
            {
                "level": c["level"],
                "pages": span_text([(c["first_page"], c["last_page"])]),
                "state": "done" if c["done"] else ("running" if c["requests"] else "waiting"),
            }
            for c in chunks
        ],
        "parts": sum(1 for c in chunks if c["level"] == 0),
        "urls": {
            "status": reverse("chat:document", args=[document.id]),
            "cancel": reverse("chat:document-cancel", args=[document.id]),
            "delete": reverse("chat:document-delete", args=[document.id]),
            "summarize": reverse("chat:document-summarize", args=[document.id]),
        },
    }
    if document.scanned_pages and document.status != Document.Status.FAILED:
        note = scanned_note(document.scanned_pages, document.ocr_pages, document.model_read_pages)
        # scan_note: why the model did not read them, as its admin chose
        payload["scanned_note"] = f"{document.scan_note} {note}".strip()
    return payload


def scanned_note(scanned: list[int], read_by_ocr: list[int], read_by_model: list[int] = ()) -> str:
    """What the page says about pages without a text layer: read by the model, by OCR, or left out."""
    notes = []
    if read_by_model:
        notes.append(
            ngettext(
                "Page %(pages)s is a scanned image; its text was read by the model and may contain errors.",
                "Pages %(pages)s are scanned images; their text was read by the model and may contain errors.",
                len(read_by_model),
            )
            % {"pages": page_list(read_by_model)}
        )
    if read_by_ocr:
        notes.append(
            ngettext(
                "Page %(pages)s is a scanned image; its text was read by text recognition (OCR) and may contain errors.",
                "Pages %(pages)s are scanned images; their text was read by text recognition (OCR) and may contain errors.",
                len(read_by_ocr),
            )
            % {"pages": page_list(read_by_ocr)}
        )
    left_out = [number for number in scanned if number not in {*read_by_ocr, *read_by_model}]
    if left_out:
        notes.append(
            ngettext(
                "Page %(pages)s has no text layer (a scanned image) and was left out: text recognition (OCR) is not available.",
                "Pages %(pages)s have no text layer (scanned images) and were left out: text recognition (OCR) is not available.",
                len(left_out),
            )
            % {"pages": page_list(left_out)}
        )
    return " ".join(notes)


def conversation_documents(conversation: Conversation | None) -> list[dict]:
    if conversation is None:
        return []
    return [document_payload(d) for d in conversation.documents.order_by("created_at")]


# ---------------------------------------------------------------- a summary's reads (the worker's run)


def text_pages(document_id) -> list[tuple[int, str]]:
    """(number, text) of the document's pages that have text, in order."""
    return list(DocumentPage.objects.filter(document_id=document_id).exclude(text="").values_list("number", "text"))


def summary_chunks(document_id, level: int) -> list[DocumentChunk]:
    # With its document: pages_label reads the document's kind and OCR pages (no query in async code).
    return list(DocumentChunk.objects.filter(document_id=document_id, level=level).select_related("document"))


def page_texts_between(document_id, first: int, last: int) -> dict[int, str]:
    pages = DocumentPage.objects.filter(document_id=document_id, number__gte=first, number__lte=last)
    return dict(pages.values_list("number", "text"))


def document_and_profile(document_id) -> tuple[Document, ServerProfile | None]:
    """The document and the server profile of its conversation (None when it has none)."""
    document = Document.objects.select_related("conversation__profile").get(id=document_id)
    return document, document.conversation.profile if document.conversation else None

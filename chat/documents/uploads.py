"""Uploads: checked at the border, then kept on disk for the worker.

An encrypted PDF's password is used once, in memory, by the check's child (on its stdin,
``pdf.upload_check.check_pdf_in_child``), to make a copy without the encryption; it is stored nowhere.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from django.conf import settings
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from chat.documents import formats
from chat.documents.extraction import document_kind, text_sections
from chat.documents.languages import clean_language
from chat.documents.pdf import opening
from chat.documents.pdf.reader import pdf_refusal
from chat.documents.pdf.upload_check import check_pdf_in_child
from chat.errors import DocumentError
from chat.models import Conversation, Document


def check_upload(name: str, data: bytes, password: str | None = None) -> tuple[str, int, bytes]:
    """(kind, pages, the bytes to keep) or DocumentError with the reason it is refused.

    The name's extension must be on the allowlist and the content must be what it says
    (sniffed: a PDF header, a zip holding a Word document, text that is HTML)."""
    kind = document_kind(name)
    if len(data) > settings.DOCUMENT_MAX_BYTES:
        raise DocumentError(
            _("The file is too large: the limit is %(mb)d MB.") % {"mb": settings.DOCUMENT_MAX_BYTES // 1_048_576}
        )
    if not data:
        raise DocumentError(_("The file is empty."))
    if kind == Document.Kind.PDF:
        return kind, *_check_pdf(data, password)
    if kind == Document.Kind.DOCX and not formats.is_docx(data):
        raise DocumentError(_("This file is not a Word document (.docx), whatever its name says."))
    pages = sum(1 for _section in text_sections(data, kind))
    if pages == 0:
        raise DocumentError(_("This document contains no text."))
    _check_page_limit(pages)
    return kind, pages, data


def _check_pdf(data: bytes, password: str | None) -> tuple[int, bytes]:
    if b"%PDF-" not in data[:1024]:
        raise DocumentError(_("This file is not a PDF, whatever its name says."))
    pages, decrypted = check_pdf_in_child(data, password)
    if pages == 0:
        raise DocumentError(_("This PDF has no pages."))
    _check_page_limit(pages)
    if not password:
        return pages, data
    if decrypted is None:  # kept encrypted, it could never be read: the password is kept nowhere
        raise pdf_refusal(opening.DAMAGED, password)
    return pages, decrypted


def _check_page_limit(pages: int) -> None:
    if pages > settings.DOCUMENT_MAX_PAGES:
        raise DocumentError(
            ngettext(
                "The document has %(pages)d page; the limit is %(limit)d.",
                "The document has %(pages)d pages; the limit is %(limit)d.",
                pages,
            )
            % {"pages": pages, "limit": settings.DOCUMENT_MAX_PAGES}
        )


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

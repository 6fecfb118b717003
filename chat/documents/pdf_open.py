"""Opening a PDF with PDFium, without Django: used by extraction and by the upload check's child
(``pdf_check_worker``), which starts in a fraction of a second because it loads nothing else.
A refusal carries its reason (``PASSWORD``, ``DAMAGED``); ``refusal`` words it for the person."""

from __future__ import annotations

import io

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c
from django.utils.translation import gettext as _

from chat.errors import DocumentError, PasswordNeeded

PASSWORD = "password"
DAMAGED = "damaged"


class Refused(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def open_document(data: bytes, password: str | None) -> pdfium.PdfDocument:
    try:
        return pdfium.PdfDocument(data, password=password or None)
    except pdfium.PdfiumError as error:
        raise Refused(
            PASSWORD if getattr(error, "err_code", None) == pdfium_c.FPDF_ERR_PASSWORD else DAMAGED
        ) from error


def decrypted_copy(pdf: pdfium.PdfDocument) -> bytes:
    buffer = io.BytesIO()
    pdf.save(buffer, flags=pdfium_c.FPDF_REMOVE_SECURITY)
    return buffer.getvalue()


def refusal(reason: str, password: str | None) -> DocumentError:
    """The error the person reads for a PDF refused for ``reason``."""
    if reason == PASSWORD:
        if password:
            return PasswordNeeded(_("The password is not right for this PDF. Try again."))
        return PasswordNeeded(_("This PDF is protected by a password. Enter it to read the file."))
    return DocumentError(_("This PDF is damaged and cannot be read."))

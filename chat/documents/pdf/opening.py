"""Opening a PDF with PDFium, with nothing of Django: extraction's way, and the upload check's
child's (``upload_check_worker``), which loads this module and PDFium only. A refusal carries its
reason (``PASSWORD``, ``DAMAGED``); ``reader.pdf_refusal`` words it for the person."""

from __future__ import annotations

import io

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

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
    try:
        pdf.save(buffer, flags=pdfium_c.FPDF_REMOVE_SECURITY)
    except pdfium.PdfiumError as error:
        raise Refused(DAMAGED) from error
    return buffer.getvalue()

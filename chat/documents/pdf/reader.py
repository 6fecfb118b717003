"""A PDF's pages as text, in reading order.

Text layers in a file are read by Poppler's pdftotext in several processes (``poppler_text``,
which says why); PDFium (``pages``) opens the document, reads what Poppler cannot (a PDF given
as bytes or with a password, a range Poppler failed on, no pdftotext installed) and looks at
pages with no text for images: scans, read through OCR (``ocr``) in several processes this one
starts, or rendered for the model to read.
"""

from __future__ import annotations

import logging
import multiprocessing
import shutil
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path

import pypdfium2 as pdfium
from django.conf import settings
from django.utils.translation import gettext as _

from chat.documents.page_text import PageText, clean_text
from chat.documents.pdf import ocr, opening, poppler_text
from chat.documents.pdf.pages import open_in_helper, read_in_helper, read_page, render_scan
from chat.errors import DocumentError, PasswordNeeded

# Forked from the extraction worker, a fresh single-threaded process: milliseconds to start,
# where a spawned interpreter takes a good part of a second.
START_METHOD = "fork"

log = logging.getLogger(__name__)


def pdf_refusal(reason: str, password: str | None) -> DocumentError:
    """The error the person reads for a PDF that PDFium refused for ``reason`` (``opening``)."""
    if reason == opening.PASSWORD:
        if password:
            return PasswordNeeded(_("The password is not right for this PDF. Try again."))
        return PasswordNeeded(_("This PDF is protected by a password. Enter it to read the file."))
    return DocumentError(_("This PDF is damaged and cannot be read."))


def ocr_options() -> ocr.OcrOptions | None:
    """How scanned pages are read, or None when text recognition is off or Tesseract is missing."""
    if not settings.DOCUMENT_OCR or not shutil.which(settings.DOCUMENT_OCR_BINARY):
        return None
    if not ocr.LANGUAGES.fullmatch(settings.DOCUMENT_OCR_LANGUAGES):
        log.warning("QWENWEB_DOCUMENT_OCR_LANGUAGES is not like eng+chi_sim: text recognition is off")
        return None
    return ocr.OcrOptions(
        settings.DOCUMENT_OCR_BINARY,
        settings.DOCUMENT_OCR_LANGUAGES,
        settings.DOCUMENT_OCR_DPI,
        settings.DOCUMENT_OCR_PAGE_S,
    )


def extract_pdf_pages(
    source: bytes | str | Path,
    password: str | None = None,
    *,
    processes: int = 1,
    ocr_with: ocr.OcrOptions | None = None,
    scan_image_edge: int = 0,
) -> Iterator[PageText]:
    """Every page's text in reading order; pages with images and no text are marked scanned,
    and read by OCR when ``ocr_with`` says how: by up to ``processes`` helper processes at
    once (a file on disk only), the text layers meanwhile read here. With ``scan_image_edge``
    a scan is not read here but rendered (that many pixels on its long edge at most) for the
    model to read, in the worker: this process never talks to the network."""
    if isinstance(source, Path):
        source = str(source)
    try:
        pdf = opening.open_document(source, password)
    except opening.Refused as refused:
        raise pdf_refusal(refused.reason, password) from refused
    helpers = _OcrHelpers(source, processes) if processes > 1 and isinstance(source, str) else None
    try:
        waiting: deque[PageText | Future] = deque()
        for index, text in _text_layers(pdf, source, password, processes):
            # No text from Poppler: PDFium reads the page (any text it finds, images: a scan).
            page = PageText(index + 1, text) if text else read_page(pdf, index, None)
            if page.scanned and scan_image_edge:
                image = render_scan(pdf, index, settings.DOCUMENT_OCR_DPI, scan_image_edge)
                page = PageText(page.number, page.text, scanned=True, image=image)
            elif page.scanned and ocr_with is not None:
                page = helpers.submit(index, ocr_with) if helpers else read_page(pdf, index, ocr_with)
            waiting.append(page)
            while waiting and (isinstance(waiting[0], PageText) or waiting[0].done()):
                yield _ready(waiting.popleft())
        while waiting:
            yield _ready(waiting.popleft())
    finally:
        if helpers is not None:
            helpers.close()
        pdf.close()


def _text_layers(
    pdf: pdfium.PdfDocument, source: bytes | str, password: str | None, processes: int
) -> Iterator[tuple[int, str | None]]:
    """(0-based index, text) of every page in order; text None where PDFium is to read it.

    Poppler reads a file without a password (a password in its argv would be visible to
    every local user in /proc); a PDF in memory or with a password is PDFium's alone.
    """
    binary = settings.DOCUMENT_PDFTOTEXT_BINARY
    if not isinstance(source, str) or password or not shutil.which(binary):
        yield from ((index, None) for index in range(len(pdf)))
        return
    for first, last, texts in poppler_text.read_ranges(binary, source, len(pdf), max(1, processes)):
        if texts is None:
            log.warning("pdftotext failed on pages %d-%d: PDFium reads them", first, last)
            texts = [None] * (last - first + 1)
        for offset, text in enumerate(texts):
            yield first - 1 + offset, None if text is None else clean_text(text)


def _ready(item: PageText | Future) -> PageText:
    return item if isinstance(item, PageText) else item.result()


class _OcrHelpers:
    """Helper processes that read scanned pages by OCR, started at the first scan.

    A page's OCR takes about a second, so each scan is its own task (the text layers are
    read in ranges by pdftotext processes, ``poppler_text``). Each helper opens the file with its own PDFium (it
    is not thread-safe). The extraction worker that starts them is an ordinary process
    (Celery's daemonic children could not start a pool); they inherit its CPU-time and
    memory limits and its process group, which the worker's parent ends as a whole.
    """

    def __init__(self, path: str, processes: int):
        self.path, self.processes = path, processes
        self.pool: ProcessPoolExecutor | None = None

    def submit(self, index: int, ocr_with: ocr.OcrOptions) -> Future:
        if self.pool is None:
            context = multiprocessing.get_context(START_METHOD)
            self.pool = ProcessPoolExecutor(
                self.processes, mp_context=context, initializer=open_in_helper, initargs=(self.path,)
            )
        return self.pool.submit(read_in_helper, index, ocr_with)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)

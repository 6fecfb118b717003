"""A PDF's pages as text, with no Django: what the extraction worker's helper processes run.

PDFium (pypdfium2) reads the text layer where Poppler's pdftotext (``poppler_text``, about
three times faster a page) does not: CID/CJK fonts through their ToUnicode maps, two-column
pages column by column. A page with images and no text is a scan: it is
rendered and read by Tesseract (``ocr``) when ``OcrOptions`` are given. PDFium is not
thread-safe, so the helper processes that read scans by OCR each open the file themselves.
"""

from __future__ import annotations

import logging

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from chat.documents.page_text import PageText, clean_text
from chat.documents.pdf.ocr import OcrFailed, OcrOptions, recognize_png, render_png

log = logging.getLogger(__name__)


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
    (left_low, left_high), (right_low, right_high) = (
        (min(r[1] for r in side), max(r[3] for r in side)) for side in (left_side, right_side)
    )
    shortest = min(left_high - left_low, right_high - right_low)
    shared = min(left_high, right_high) - max(left_low, right_low)
    return gutter if shortest > 0 and shared >= 0.5 * shortest else None


def _text_layer(page: pdfium.PdfPage) -> tuple[str, bool]:
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


def read_page(pdf: pdfium.PdfDocument, index: int, ocr: OcrOptions | None) -> PageText:
    page = pdf[index]
    try:
        text, scanned = _text_layer(page)
        if scanned and ocr is not None:
            try:
                png = render_png(page, ocr.dpi)
                return PageText(index + 1, clean_text(recognize_png(png, ocr)), scanned=True, ocr=True)
            except OcrFailed as error:  # the page is left out, as a scan without OCR is
                log.warning("page %d: text recognition failed: %s", index + 1, error)
        return PageText(index + 1, text, scanned)
    finally:
        page.close()


def render_scan(pdf: pdfium.PdfDocument, index: int, dpi: int, max_edge: int) -> bytes:
    """A scanned page as a PNG of at most ``max_edge`` pixels on its long edge, for the model to read."""
    page = pdf[index]
    try:
        return render_png(page, dpi, max_edge)
    finally:
        page.close()


# ---------------------------------------------------------------- helper processes

_open: dict[str, pdfium.PdfDocument] = {}


def open_in_helper(path: str) -> None:
    """A helper process's initializer: it keeps the document open for all its batches."""
    _open["pdf"] = pdfium.PdfDocument(path)


def read_in_helper(index: int, ocr: OcrOptions | None) -> PageText:
    """Page ``index`` (0-based) of the helper's document."""
    return read_page(_open["pdf"], index, ocr)

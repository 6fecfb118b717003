"""Text out of an uploaded file, page by page, in reading order.

PDF text comes from PDFium (pypdfium2): fast, reads CID/CJK fonts through their
ToUnicode maps, and opens encrypted files given the password. Two-column pages are
read column by column. TXT and Markdown have no pages: they are cut into page-sized
blocks at line breaks so citations still point somewhere.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c
from django.utils.translation import gettext as _

from chat.errors import DocumentError, PasswordNeeded
from chat.models import Document

EXTENSIONS = {".pdf": Document.Kind.PDF, ".txt": Document.Kind.TEXT, ".md": Document.Kind.MARKDOWN}
EXTENSIONS[".markdown"] = Document.Kind.MARKDOWN
TEXT_PAGE_CHARS = 3000  # a "page" of a TXT/Markdown file
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\ufffe\uffff]")


@dataclass(frozen=True)
class PageText:
    number: int  # 1-based
    text: str
    scanned: bool = False  # no text layer, but images: a scan


def document_kind(name: str) -> str:
    kind = EXTENSIONS.get(Path(name).suffix.lower())
    if kind is None:
        raise DocumentError(_("Only PDF, TXT and Markdown (.md) files can be read."))
    return kind


def open_pdf(data: bytes, password: str | None) -> pdfium.PdfDocument:
    try:
        return pdfium.PdfDocument(data, password=password or None)
    except pdfium.PdfiumError as error:
        if getattr(error, "err_code", None) == pdfium_c.FPDF_ERR_PASSWORD:
            if password:
                raise PasswordNeeded(_("The password is not right for this PDF. Try again.")) from error
            raise PasswordNeeded(_("This PDF is protected by a password. Enter it to read the file.")) from error
        raise DocumentError(_("This PDF is damaged and cannot be read.")) from error


def decrypted_copy(pdf: pdfium.PdfDocument) -> bytes:
    buffer = io.BytesIO()
    pdf.save(buffer, flags=pdfium_c.FPDF_REMOVE_SECURITY)
    return buffer.getvalue()


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


def iter_text_pages(text: str) -> Iterator[str]:
    """Cut plain text into blocks of about TEXT_PAGE_CHARS, at line breaks where there is one.

    Linear in the text's length: a huge line is cut by index, never by re-slicing its rest;
    pages are yielded one at a time, so counting them keeps none.
    """
    current: list[str] = []
    size = 0
    found = False
    for line in text.splitlines():
        if len(line) > TEXT_PAGE_CHARS:  # one huge line: cut it
            if current:
                yield clean_text("\n".join(current))
                current, size = [], 0
            cut = (len(line) - 1) // TEXT_PAGE_CHARS * TEXT_PAGE_CHARS  # the rest, up to a page, goes on
            for start in range(0, cut, TEXT_PAGE_CHARS):
                found = True
                yield clean_text(line[start : start + TEXT_PAGE_CHARS])
            line = line[cut:]
        if size + len(line) > TEXT_PAGE_CHARS and current:
            found = True
            yield clean_text("\n".join(current))
            current, size = [], 0
        current.append(line)
        size += len(line) + 1
    if current or not found:
        yield clean_text("\n".join(current))


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
    pdf = open_pdf(source, password)
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
    for number, text in enumerate(iter_text_pages(decode_text(path.read_bytes())), start=1):
        yield PageText(number, text)

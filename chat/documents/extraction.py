"""Text out of an uploaded file, page by page, in reading order, whatever its format.

PDFs are read by the ``pdf`` package (text layers, scans). DOCX and HTML are cut into
sections at their headings (``formats``). TXT and Markdown have no pages: they are cut into
page-sized blocks at line breaks so citations still point somewhere.

The reading child (``extract_worker``) runs this without the project's apps, and loads the reader
of its file's kind only: a text file's child starts in a tenth of a second instead of more than one.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from django.utils.translation import gettext as _

from chat import document_kinds as kinds
from chat.documents.page_text import PageText, clean_text
from chat.errors import DocumentError

EXTENSIONS = {".pdf": kinds.PDF, ".txt": kinds.TEXT, ".md": kinds.MARKDOWN, ".markdown": kinds.MARKDOWN}
EXTENSIONS |= {".docx": kinds.DOCX, ".html": kinds.HTML, ".htm": kinds.HTML}
TEXT_PAGE_CHARS = 3000  # a "page" of a TXT/Markdown file


def document_kind(name: str) -> str:
    kind = EXTENSIONS.get(Path(name).suffix.lower())
    if kind is None:
        raise DocumentError(_("Only PDF, Word (.docx), HTML, TXT and Markdown (.md) files can be read."))
    return kind


def decode_text(data: bytes) -> str:
    if data.startswith(b"%PDF-"):
        raise DocumentError(_("This file is a PDF, not a text file: rename it to .pdf."))
    if b"\x00" in data[:8192]:
        raise DocumentError(_("This file is not text, whatever its name says."))
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise DocumentError(_("This file is not UTF-8 text, whatever its name says.")) from error


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


def extract_pages(path: Path, kind: str, *, processes: int = 1, scan_image_edge: int = 0) -> Iterator[PageText]:
    """``scan_image_edge``: scans are rendered for the model to read instead of read by OCR."""
    # Each reader is imported where its kind is read: PDFium, python-docx and BeautifulSoup take a
    # good part of the child's start, and a text file needs none of them.
    if kind == kinds.PDF:
        from chat.documents.pdf.reader import extract_pdf_pages, ocr_options

        ocr_with = None if scan_image_edge else ocr_options()
        yield from extract_pdf_pages(path, processes=processes, ocr_with=ocr_with, scan_image_edge=scan_image_edge)
        return
    for number, text in enumerate(text_sections(path.read_bytes(), kind), start=1):
        yield PageText(number, text)


def text_sections(data: bytes, kind: str) -> Iterable[str]:
    """A DOCX's or HTML file's sections, or a text file's page-sized blocks."""
    if kind not in (kinds.DOCX, kinds.HTML):
        return iter_text_pages(decode_text(data))
    from chat.documents import formats  # python-docx and BeautifulSoup, where their kind is read

    return formats.docx_sections(data) if kind == kinds.DOCX else formats.html_sections(formats.html_text(data))

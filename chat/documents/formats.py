"""DOCX and HTML: their text, cut into sections at headings, each section a "page" numbered from 1.

A section's text starts with its reference line (``§ 2 Heading``) so summaries and
answers can cite it in place of a page number. DOCX is read by python-docx after the
zip is checked against a cap on its uncompressed size (a zip bomb is refused, inflated
only in small pieces up to the cap). HTML is parsed by BeautifulSoup (Python's own
parser), never rendered: only its text is kept, scripts, styles and other non-text
elements are dropped.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Iterator

import docx
from bs4 import BeautifulSoup, Tag, UnicodeDammit
from django.conf import settings
from django.utils.translation import gettext as _
from docx.table import Table

from chat.documents.page_text import clean_text
from chat.errors import DocumentError

DOCX_MAX_ENTRIES = 10_000
DOCX_READ_BYTES = 1 << 20  # a part is inflated at most this much at a time while it is checked
_HEADING_STYLE = re.compile(r"^(heading \d|title)$", re.IGNORECASE)
_HTML_HEADING = re.compile(r"^h[1-6]$")
_HTML_DROPPED = "script style template noscript iframe object embed svg math canvas head".split()
# Elements that end a line of text; inline ones (b, a, span) run on.
_HTML_BLOCKS = frozenset("p div br li tr td th section article blockquote pre table dd dt".split())
_MARK = "\ue000"  # a private-use character: where a heading was (removed from the text first)
_BLANK_LINES = re.compile(r"\n{3,}")


def sections_to_pages(sections: list[tuple[str, list[str]]]) -> Iterator[str]:
    """``(heading, lines)`` pairs as section texts, each headed by ``§ N heading``; empty ones dropped."""
    number = 0
    for heading, lines in sections:
        body = _BLANK_LINES.sub("\n\n", clean_text("\n".join(lines)))
        if not heading and not body:
            continue
        number += 1
        yield clean_text(f"§ {number} {heading}".rstrip() + "\n" + body)


# ---------------------------------------------------------------- DOCX


def is_docx(data: bytes) -> bool:
    if not data.startswith(b"PK\x03\x04"):
        return False
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = set(archive.namelist())
    except (zipfile.BadZipFile, ValueError):
        return False
    return "word/document.xml" in names and "[Content_Types].xml" in names


def check_docx_archive(data: bytes) -> None:
    """Refuse a DOCX whose parts would inflate past the cap: first by the sizes the zip declares, then
    by inflating each part in small pieces, as the declared sizes can lie (Python's zip reader inflates a
    part whole before it compares, so python-docx would swell first and find the lie after)."""
    limit = settings.DOCUMENT_DOCX_MAX_UNCOMPRESSED_BYTES
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            entries = archive.infolist()
            if len(entries) > DOCX_MAX_ENTRIES or sum(entry.file_size for entry in entries) > limit:
                raise _too_large(limit)
            inflated = 0
            for entry in entries:
                with archive.open(entry) as part:
                    while piece := part.read(DOCX_READ_BYTES):
                        inflated += len(piece)
                        if inflated > limit:
                            raise _too_large(limit)
    except DocumentError:
        raise
    except Exception as error:  # a bad CRC (a part inflating past its declared size), zlib's, encrypted parts
        raise DocumentError(_("This Word document is damaged and cannot be read.")) from error


def _too_large(limit: int) -> DocumentError:
    return DocumentError(
        _("This Word document unpacks to more than %(mb)d MB; the limit is there to stop zip bombs.")
        % {"mb": limit // 1_048_576}
    )


def docx_sections(data: bytes) -> list[str]:
    check_docx_archive(data)
    try:
        document = docx.Document(io.BytesIO(data))
    except Exception as error:  # python-docx raises many kinds on a broken part
        raise DocumentError(_("This Word document is damaged and cannot be read.")) from error
    sections: list[tuple[str, list[str]]] = [("", [])]
    for block in document.iter_inner_content():
        style = getattr(getattr(block, "style", None), "name", "") or ""
        if _HEADING_STYLE.match(style) and block.text.strip():
            sections.append((" ".join(block.text.split()), []))
            continue
        if isinstance(block, Table):
            sections[-1][1].extend(" | ".join(cell.text.strip() for cell in row.cells) for row in block.rows)
        else:
            sections[-1][1].append(block.text)
    return list(sections_to_pages(sections))


# ---------------------------------------------------------------- HTML


def html_text(data: bytes) -> str:
    """The page's characters in the encoding it declares (BOM, <meta charset>), else as detected."""
    if b"\x00" in data[:8192] and not data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise DocumentError(_("This file is not HTML, whatever its name says."))
    text = UnicodeDammit(data, is_html=True).unicode_markup
    if text is None or not looks_like_html(text):
        raise DocumentError(_("This file is not HTML, whatever its name says."))
    return text


def looks_like_html(text: str) -> bool:
    head = text[:4096].lstrip().lower()
    return head.startswith(("<!doctype html", "<html", "<?xml")) or bool(
        re.search(r"<(html|body|head|p|div|h[1-6])\b", head)
    )


def html_sections(text: str) -> list[str]:
    soup = BeautifulSoup(text.replace(_MARK, ""), "html.parser")
    for tag in soup.find_all(_HTML_DROPPED):
        tag.decompose()
    sections: list[tuple[str, list[str]]] = [("", [])]
    for line in _text_with_breaks(soup).split("\n"):
        if line.startswith(_MARK):
            sections.append((line[1:].strip(), []))
        else:
            sections[-1][1].append(" ".join(line.split()))
    return list(sections_to_pages(sections))


def _text_with_breaks(soup: BeautifulSoup) -> str:
    """The page's text (``get_text``'s strings) with a line break before and after each block element,
    and each heading as one line after ``_MARK``, in one pass over the tree.

    Not by inserting the breaks into the tree: bs4 walks the whole subtree beside each insertion, which
    is quadratic in the nesting depth, in the web process, where uploads are checked."""
    types = soup.interesting_string_types or Tag.MAIN_CONTENT_STRING_TYPES
    pieces: list[str] = []
    depths: dict[int, int] = {id(soup): 0}
    open_tags: list[tuple[int, bool]] = []  # (depth, is a block) of the elements the walk is inside
    heading_depth: int | None = None  # inside a heading: its text was taken whole
    for node in soup.descendants:
        depth = depths[id(node.parent)] + 1
        if isinstance(node, Tag):
            depths[id(node)] = depth
        if heading_depth is not None:
            if depth > heading_depth:
                continue
            heading_depth = None
        while open_tags and open_tags[-1][0] >= depth:  # the walk has left these elements
            if open_tags.pop()[1]:
                pieces.append("\n")
        if isinstance(node, Tag):
            if _HTML_HEADING.match(node.name):
                pieces.append(f"\n{_MARK}{' '.join(node.get_text(' ').split())}\n")
                heading_depth = depth
                continue
            is_block = node.name in _HTML_BLOCKS
            if is_block:
                pieces.append("\n")
            open_tags.append((depth, is_block))
        elif type(node) is types if isinstance(types, type) else type(node) in types:
            pieces.append(node)
    pieces.extend("\n" for _depth, is_block in reversed(open_tags) if is_block)
    return "".join(pieces)

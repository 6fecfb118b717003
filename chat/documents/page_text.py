"""A page of a document as extraction gives it, whatever its format, and the cleaning every
page's text gets. No Django: the extraction child's helper processes use it."""

from __future__ import annotations

import re
from dataclasses import dataclass

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\ufffe\uffff]")


@dataclass(frozen=True)
class PageText:
    number: int  # 1-based (a section's number for DOCX and HTML)
    text: str
    scanned: bool = False  # no text layer, but images: a scan
    ocr: bool = False  # its text was read from the image by text recognition
    image: bytes = b""  # a scan rendered as PNG, for the model to read (``pdf.pages.render_scan``)


def clean_text(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROL.sub("", text)
    return "\n".join(line.rstrip() for line in text.split("\n")).strip()
